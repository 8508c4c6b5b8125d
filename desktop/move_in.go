// Moving a desktop in: the checks, the load of its stream, and the hand-
// over of its record (the source's side is in move.go).

package desktop

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"
)

// movedGuestAnswers bounds the wait for a moved guest's agent.
const movedGuestAnswers = 20 * time.Second

// runs starts a moved machine's guest and waits for its agent to answer.
func (mv *Moves) runs(ctx context.Context, mach Machine) error {
	if c, ok := mach.(Committer); ok {
		if err := c.Committed(ctx); err != nil {
			return fmt.Errorf("start the guest: %w", err)
		}
	}
	actx, cancel := context.WithTimeout(ctx, movedGuestAnswers)
	defer cancel()
	if err := mach.Agent().Call(actx, "guest-ping", nil, nil); err != nil {
		return fmt.Errorf("the guest did not answer after the move (%w): its source runs it on", err)
	}
	return nil
}

// CanTake says whether desktop d could move here now: a fleet's host, a
// driver that takes moving machines, the desktop not here yet, and room
// under the caps (ErrCapacity). Its snapshot, which the caller may pull
// first, is checked when it comes (Receive).
func (mv *Moves) CanTake(d Desktop) error {
	release, err := mv.admit(d)
	if err == nil {
		release()
	}
	return err
}

// admit is CanTake that keeps the room it found: release gives it back.
func (mv *Moves) admit(d Desktop) (release func(), err error) {
	if _, err := mv.store(); err != nil {
		return nil, err
	}
	if !isDesktopID(d.ID) {
		return nil, fmt.Errorf("%w: %q is not a desktop id (d- and 16 hex digits)", ErrInvalid, d.ID)
	}
	if d.Resources.MemoryMiB <= 0 || d.Snapshot == "" {
		return nil, fmt.Errorf("%w: desktop %s: a moving desktop's record names its snapshot and memory", ErrInvalid, d.ID)
	}
	m := mv.m
	if _, err := m.lookup(d.ID); err == nil {
		return nil, fmt.Errorf("%w: desktop %s already runs on this host", ErrConflict, d.ID)
	}
	if _, ok := m.drv.(LiveReceiver); !ok {
		return nil, fmt.Errorf("%w: the %s driver cannot take a moving desktop", ErrConflict, m.drv.Name())
	}
	if err := m.capacity.checkSpace("move in"); err != nil {
		return nil, err
	}
	release, err = m.capacity.reserve(1, d.Resources.MemoryMiB)
	if err != nil {
		return nil, fmt.Errorf("move in %s: %w", d.ID, err)
	}
	return release, nil
}

// Receive takes in desktop d, moving here from host from, loading its
// stream from r. The desktop is this host's once its record is
// (TakeMoved), and its guest then runs here.
func (mv *Moves) Receive(ctx context.Context, d Desktop, from string, r io.Reader) (Desktop, error) {
	release, err := mv.admit(d)
	if err != nil {
		return Desktop{}, err
	}
	defer release()
	m := mv.m
	ms, lr := m.store.(MoveStore), m.drv.(LiveReceiver)
	snap, err := m.catalog.Get(d.Snapshot)
	if err != nil {
		return Desktop{}, fmt.Errorf("move in %s: %w", d.ID, err)
	}
	in, err := lr.Incoming(ctx, IncomingSpec{ID: d.ID, Snapshot: snap, Source: d.Machine})
	if err != nil {
		return Desktop{}, fmt.Errorf("move in %s: %w", d.ID, err)
	}
	abandon := func(err error) (Desktop, error) {
		actx, cancel := context.WithTimeout(m.base, time.Minute)
		defer cancel()
		in.Abandon(actx)
		return Desktop{}, fmt.Errorf("move in %s: %w", d.ID, err)
	}
	mach, _, err := in.Receive(ctx, r)
	if err != nil {
		return abandon(err)
	}
	// The guest runs here, and must answer, before the record turns:
	// until then the source's stopped copy is the desktop, and a guest
	// that came over broken fails the move instead of the desktop.
	if err := mv.runs(ctx, mach); err != nil {
		return abandon(err)
	}
	d.Machine, d.Driver, d.State, d.Reason = mach.Record(), m.drv.Name(), StateRunning, ""
	d.GuestPending = true
	if err := ms.TakeMoved(d, from); err != nil {
		return abandon(err)
	}
	Fault(FaultMoveTaken)
	e := &entry{d: d, m: mach, guest: guestState{ready: newGuestReady()}}
	e.op.Lock()
	defer e.op.Unlock()
	m.mu.Lock()
	m.desktops[d.ID] = e
	m.mu.Unlock()
	// The guest's clock stood still while it moved: set again.
	m.machineUp(e, mach, true, nil)
	d = e.snapshot()
	m.publish(EventMoved, d)
	m.kickTTL()
	return d, nil
}

// isDesktopID says whether id is one NewID("d-") makes: a moving
// desktop's id names its directories here.
func isDesktopID(id string) bool {
	hexDigits, ok := strings.CutPrefix(id, "d-")
	if !ok || len(hexDigits) != 16 {
		return false
	}
	_, err := hex.DecodeString(hexDigits)
	return err == nil
}
