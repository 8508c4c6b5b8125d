package desktop

import (
	"context"
	"fmt"
	"time"
)

// ResetRequest is what a reset may ask for besides going back.
type ResetRequest struct {
	// Clock, when set, is the guest's wall-clock time the reset returns
	// with, and the one later resets go back to. Unset: the clock the
	// desktop's create (or last reset) asked for, or the host's.
	Clock *time.Time `json:"clock,omitempty"`
}

// Reset returns a desktop to the snapshot it was created from, as a create
// from that snapshot would make it, but keeping what names it: its id and
// name (so its URLs and per-desktop tokens), network policy, control
// holder, TTL and resources. The old machine ends while a new one, under
// a machine id of its own, restores from the snapshot (through the warm
// pool when the driver has one); the mirror and anything else observing
// reattach through MachineUp. The snapshot's on_create commands run
// again, except on a fork's copy (its template ran them).
//
// A paused, hibernated or failed desktop comes back running. A desktop a
// person controls is refused like any agent action, and so is one with
// volumes attached (detach them first: a reset would need to mount them in
// the new guest, which is not built).
func (l *Lineage) Reset(ctx context.Context, id string, req ResetRequest) (Desktop, error) {
	m := l.m
	if err := CheckClock(req.Clock); err != nil {
		return Desktop{}, err
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	// A desktop that holds no memory now reserves like a wake; one that
	// does gives its machine back before taking another.
	release, err := m.capacity.reserveComeback(e.snapshot(), "reset")
	if err != nil {
		return e.snapshot(), err
	}
	defer release()
	e.op.Lock()
	defer e.op.Unlock()
	d := e.snapshot()
	if err := resettable(d); err != nil {
		return d, err
	}
	snap, err := m.snapshotFor(d.Snapshot)
	if err != nil {
		return d, fmt.Errorf("reset %s: %w", id, err)
	}

	// Counted before the machine ends, so whatever sees it end (a DevTools
	// connection's proxy) can already tell a reset from a crash.
	now := m.now().UTC()
	e.mu.Lock()
	e.d.Resets++
	e.d.ResetAt = &now
	e.mu.Unlock()
	// The old machine ends while the new one restores: the new one has a
	// machine id of its own (drivers key files and definitions by it), so
	// they never share a file, and the reset costs what a create does
	// rather than a machine's end on top. Both hold memory for that moment.
	ended := make(chan error, 1)
	go func() { ended <- m.endMachine(e, "reset") }()
	rctx, cancel := context.WithTimeout(m.base, 2*time.Minute)
	defer cancel()
	mach, err := m.drv.Restore(rctx, RestoreSpec{ID: resetMachineID(id, d.Resets+1), Snapshot: snap, DiskMiB: d.Resources.DiskMiB})
	if endErr := <-ended; endErr != nil {
		if err == nil {
			mach.Destroy(context.WithoutCancel(rctx))
		}
		return e.snapshot(), endErr
	}
	if err != nil {
		return m.failed(e, "reset: restore from "+snap.Name+": "+err.Error()), fmt.Errorf("reset %s from %s: %w", id, snap.Name, err)
	}
	clock := d.Clock
	if req.Clock != nil {
		c := req.Clock.UTC()
		clock = &c
	}
	e.mu.Lock()
	e.m = mach
	e.d.State = StateRunning
	e.d.Reason = ""
	e.d.Machine = mach.Record()
	e.d.LastUsedAt = now
	e.d.Clock, e.d.ClockOffset = clock, 0
	e.d.Setup = nil
	e.guest.onCreate = nil
	if d.ForkOf == "" && len(snap.Manifest.OnCreate) > 0 {
		e.guest.onCreate = snap.Manifest.OnCreate
		e.d.Setup = &Setup{State: SetupRunning, Commands: len(e.guest.onCreate)}
	}
	e.d.GuestPending = true
	e.guest.ready = newGuestReady()
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record a reset desktop", "desktop", id, "err", err)
	}
	set := m.machineUp(e, mach, true, clock)
	clockErr := m.setup.waitClock(ctx, e, set)
	// Reset whatever the clock: what follows the desktop (input state, the
	// viewer) must hear of its new machine.
	d = e.snapshot()
	m.publish(EventReset, d)
	if clockErr != nil {
		return d, fmt.Errorf("reset %s: the desktop runs from its snapshot, but %w", id, clockErr)
	}
	return d, nil
}

// resetMachineID names the machine of a desktop's nth reset.
func resetMachineID(id string, n int) string { return fmt.Sprintf("%s-r%d", id, n) }

// resettable says why d cannot be reset now, or nil.
func resettable(d Desktop) error {
	switch d.State {
	case StateRunning, StatePaused, StateHibernated, StateFailed:
	default:
		return &TransitionError{ID: d.ID, From: d.State, Action: "reset"}
	}
	if d.Control.Holder == ControlPerson {
		// The same refusal as any agent input.
		running := d
		running.State = StateRunning
		return running.InputAllowed()
	}
	if len(d.Volumes) > 0 {
		return fmt.Errorf("%w: desktop %s has volumes attached (%s); a reset does not mount them again yet: detach them first (DELETE /v1/desktops/%s/volumes/NAME)", ErrConflict, d.ID, d.Volumes[0].Name, d.ID)
	}
	return nil
}
