// Moving a running desktop to another host of a fleet (live migration):
// the contracts with drivers and stores, and the source's side of a move
// (move_in.go has the target's).

package desktop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// EventMoved: a desktop came to run on this host from another.
const EventMoved EventType = "desktop.moved"

// Kill points of a move, for the fleet's fault tests (not in FaultPoints:
// a single host never reaches them).
const (
	// The target has taken the desktop's record and runs it; the source
	// has not yet heard.
	FaultMoveTaken = "move.taken"
	// The source heard that the target runs the desktop; its own machine
	// is not yet ended.
	FaultMoveSwitched = "move.switched"
	// The target is receiving the desktop's state.
	FaultMoveReceiving = "move.receiving"
)

// MoveStats are what the source's machine measured of a move.
type MoveStats struct {
	// Downtime is QEMU's: how long the guest's CPUs were stopped on the
	// source before its state was whole.
	Downtime time.Duration
	// StateBytes is QEMU's migration stream; DiskBytes the disk overlay's
	// chunks sent, over every pass.
	StateBytes, DiskBytes int64
}

// LiveSender is a Machine that can move to another host while it runs.
type LiveSender interface {
	// SendLive writes the machine's move stream to w: its disk overlay
	// and its state, as much as the driver can copied while the guest
	// runs, then what changed with its CPUs stopped. hold is called once,
	// before the state starts to go: from then on no request may reach
	// the machine. On success the guest is left stopped (the caller ends
	// it once the other host runs it, or resumes it); on failure it runs,
	// or the caller resumes it.
	SendLive(ctx context.Context, w io.Writer, hold func(context.Context) error) (MoveStats, error)
}

// LiveReceiver is a Driver that can take a machine moving in.
type LiveReceiver interface {
	// Incoming prepares a machine for a moving desktop's stream.
	Incoming(ctx context.Context, spec IncomingSpec) (Incoming, error)
}

// IncomingSpec describes a machine a desktop moves into.
type IncomingSpec struct {
	ID       string
	Snapshot Snapshot
	// Source is the machine record the desktop had on its source host.
	Source json.RawMessage
}

// Incoming is a machine being loaded with a moving desktop.
type Incoming interface {
	// Receive reads the move stream from r until the source asks to
	// commit, and returns the machine, its guest stopped until Committed
	// (it is a Committer), and that request's data.
	Receive(ctx context.Context, r io.Reader) (Machine, []byte, error)
	// Abandon ends and removes what a Receive that failed left.
	Abandon(ctx context.Context)
}

// MoveStore is a Store that can hand a desktop's record to another host:
// the fleet's records.
type MoveStore interface {
	// BeginMove marks d's record, this host's, as moving to host to: only
	// that host may take it.
	BeginMove(d Desktop, to string) error
	// EndMove clears the mark of a move that failed, if the record is
	// still this host's; taken says another host took it meanwhile.
	EndMove(d Desktop) (taken bool, err error)
	// TakeMoved writes d as this host's, if its record is still marked as
	// moving here from host from.
	TakeMoved(d Desktop, from string) error
}

// Moves hands running desktops to other hosts and takes them in.
type Moves struct {
	m *Manager
	// away are the desktops that moved from here, by the time they went:
	// requests another host passed here before it knew are passed on.
	mu   sync.Mutex
	away map[string]time.Time
}

// awayFor is how long a desktop that moved away is remembered.
const awayFor = 10 * time.Minute

// maxHold bounds the wait for the requests under way on a desktop before
// its state starts to go.
const maxHold = 10 * time.Second

// NewMoves moves m's running desktops to the other hosts of a fleet, and
// takes theirs in. hostd makes one per Manager.
func NewMoves(m *Manager) *Moves { return &Moves{m: m} }

func (mv *Moves) store() (MoveStore, error) {
	ms, ok := mv.m.store.(MoveStore)
	if !ok {
		return nil, fmt.Errorf("%w: moving a desktop needs a fleet (hostd serve --cluster-name)", ErrConflict)
	}
	return ms, nil
}

// Send moves desktop id to host to. send carries the machine's stream
// to that host and returns once that host runs the desktop, or fails; it
// calls hold (given to SendLive) before the state goes. On failure the
// desktop runs on here, unless the other host took it meanwhile.
func (mv *Moves) Send(ctx context.Context, id, to string, send func(ctx context.Context, mach LiveSender, d Desktop, hold func(context.Context) error) error) (Desktop, error) {
	ms, err := mv.store()
	if err != nil {
		return Desktop{}, err
	}
	e, err := mv.m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	d, mach := e.d, e.m
	e.mu.Unlock()
	if d.State != StateRunning || mach == nil {
		return d, &TransitionError{ID: id, From: d.State, Action: "move"}
	}
	ls, ok := mach.(LiveSender)
	switch {
	case !ok:
		return d, fmt.Errorf("%w: the %s driver cannot move a running desktop", ErrConflict, d.Driver)
	case len(d.Volumes) > 0:
		return d, fmt.Errorf("%w: desktop %s holds volumes, whose files stay on this host: detach them first", ErrConflict, id)
	}
	if err := ms.BeginMove(d, to); err != nil {
		return d, fmt.Errorf("move %s: %w", id, err)
	}
	gate := make(chan struct{})
	var heldAt time.Time
	hold := func(ctx context.Context) error {
		heldAt = time.Now()
		e.mu.Lock()
		e.hold = gate
		e.mu.Unlock()
		return mv.drain(ctx, e)
	}
	release := func() {
		e.mu.Lock()
		e.hold = nil
		e.mu.Unlock()
		close(gate)
	}
	err = send(ctx, ls, d, hold)
	if err != nil {
		taken, ferr := mv.endMove(ms, e)
		if ferr != nil {
			// Which host has the record is not known: resumed here, the
			// guest could run on two hosts. It stays stopped, listed
			// paused here with why.
			why := fmt.Sprintf("a move to %s failed and whether %s took the desktop is not known: resume it here only if the fleet lists it on this host", to, to)
			e.mu.Lock()
			e.d.State, e.d.Reason = StatePaused, why
			e.mu.Unlock()
			release()
			return d, fmt.Errorf("move %s to %s: %w; %s (%w)", id, to, err, why, ferr)
		}
		if !taken {
			mv.resumeHere(e, mach)
			release()
			return d, fmt.Errorf("move %s to %s: %w; it runs on here", id, to, err)
		}
		mv.m.log.Warn("the move's answer was lost, but the target took the desktop", "desktop", id, "to", to, "err", err)
	}
	Fault(FaultMoveSwitched)
	mv.gone(e, mach, to)
	release()
	if !heldAt.IsZero() {
		mv.m.log.Info("desktop moved", "desktop", id, "to", to, "held", time.Since(heldAt).Round(time.Millisecond))
	}
	return d, nil
}

// endMove takes a failed move's mark off e's record, as e holds the
// desktop now, trying for up to a minute while the fleet's records do
// not answer; taken says the target took the record meanwhile.
func (mv *Moves) endMove(ms MoveStore, e *entry) (taken bool, err error) {
	deadline := time.Now().Add(time.Minute)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		taken, err = ms.EndMove(e.snapshot())
		if err == nil || time.Now().After(deadline) {
			return taken, err
		}
		mv.m.log.Warn("a failed move's record does not answer; trying again", "desktop", e.snapshot().ID, "err", err)
		select {
		case <-time.After(wait):
		case <-mv.m.closed:
			return taken, err
		}
	}
}

// drain waits, up to maxHold, until no request uses e.
func (mv *Moves) drain(ctx context.Context, e *entry) error {
	ctx, cancel := context.WithTimeout(ctx, maxHold)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		e.mu.Lock()
		n := e.inUse
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %d requests still use the desktop after %s", ErrUnavailable, n, maxHold)
		case <-time.After(wait):
		}
	}
}

// resumeHere runs the guest again after a move that failed with it
// stopped.
func (mv *Moves) resumeHere(e *entry, mach Machine) {
	ctx, cancel := context.WithTimeout(mv.m.base, 30*time.Second)
	defer cancel()
	s, ok := mach.(Stopper)
	if !ok {
		return
	}
	if stopped, err := s.Stopped(ctx); err == nil && stopped {
		if err := mach.Resume(ctx); err != nil {
			mv.m.log.Error("resume a desktop whose move failed", "desktop", e.snapshot().ID, "err", err)
		}
	}
}

// gone drops a desktop that another host now runs: its machine here ends,
// its record is that host's.
func (mv *Moves) gone(e *entry, mach Machine, to string) {
	e.mu.Lock()
	e.expectExit = true
	e.m = nil
	// An operation that waited for the move finds the desktop gone from
	// here (its requests go to the new host).
	e.d.State, e.d.Reason = StateDeleted, "moved to host "+to
	id, uses := e.d.ID, e.d.Uses
	e.mu.Unlock()
	mv.mu.Lock()
	if mv.away == nil {
		mv.away = map[string]time.Time{}
	}
	now := time.Now()
	for k, at := range mv.away {
		if now.Sub(at) > awayFor {
			delete(mv.away, k)
		}
	}
	mv.away[id] = now
	mv.mu.Unlock()
	mv.m.forget(id)
	if mv.m.obs != nil {
		mv.m.obs.MachineDown(id)
		mv.m.obs.Forget(id)
	}
	ctx, cancel := context.WithTimeout(mv.m.base, time.Minute)
	defer cancel()
	if err := mach.Destroy(ctx); err != nil {
		mv.m.log.Warn("end the machine of a desktop that moved away", "desktop", id, "to", to, "err", err)
	}
	mv.m.lineage.collect(uses)
}

// MovedAway says whether desktop id moved from this host lately.
func (mv *Moves) MovedAway(id string) bool {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	at, ok := mv.away[id]
	return ok && time.Since(at) < awayFor
}

// Hold waits while desktop id's move holds its requests: until the move
// ends (the desktop is then here, or gone) or ctx does.
func (mv *Moves) Hold(ctx context.Context, id string) error {
	e, err := mv.m.lookup(id)
	if err != nil {
		return nil
	}
	e.mu.Lock()
	gate := e.hold
	e.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: desktop %s is moving to another host: %w", ErrUnavailable, id, ctx.Err())
	}
}
