// The state machine's transitions on a desktop: pause, resume, hibernate,
// wake and delete, and the end of a machine an operation replaces.

package desktop

import (
	"context"
	"fmt"
	"time"
)

// transition runs op on a desktop under its lock if the state allows the
// move to target, then records the new state.
func (m *Manager) transition(ctx context.Context, id, action string, target State, op func(e *entry) error) (Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	d := e.snapshot()
	if !CanTransition(d.State, target) {
		return d, &TransitionError{ID: id, From: d.State, Action: action}
	}
	if err := op(e); err != nil {
		return e.snapshot(), err
	}
	e.mu.Lock()
	e.d.State = target
	e.d.Reason = ""
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return d, fmt.Errorf("%s: record: %w", action, err)
	}
	m.publish(EventState, d)
	return d, nil
}

// Pause stops a running desktop's CPUs; its memory stays.
func (m *Manager) Pause(ctx context.Context, id string) (Desktop, error) {
	return m.transition(ctx, id, "pause", StatePaused, func(e *entry) error {
		if e.snapshot().State != StateRunning {
			return &TransitionError{ID: id, From: e.snapshot().State, Action: "pause"}
		}
		return e.m.Pause(ctx)
	})
}

// Resume continues a paused desktop.
func (m *Manager) Resume(ctx context.Context, id string) (Desktop, error) {
	d, err := m.transition(ctx, id, "resume", StateRunning, func(e *entry) error {
		if e.snapshot().State != StatePaused {
			return &TransitionError{ID: id, From: e.snapshot().State, Action: "resume"}
		}
		return e.m.Resume(ctx)
	})
	if err == nil {
		if e, lerr := m.lookup(id); lerr == nil {
			m.setup.finishGuestSetUp(e)
		}
	}
	return d, err
}

// Hibernate saves a desktop's whole state to disk and ends its machine.
func (m *Manager) Hibernate(ctx context.Context, id string) (Desktop, error) {
	return m.transition(ctx, id, "hibernate", StateHibernated, func(e *entry) error {
		e.mu.Lock()
		mach := e.m
		e.expectExit = true
		e.mu.Unlock()
		if m.obs != nil {
			m.obs.MachineDown(id)
		}
		rec, err := mach.Hibernate(context.WithoutCancel(ctx))
		if err != nil && m.obs != nil {
			m.obs.MachineUp(id, mach)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			e.expectExit = false
			return err
		}
		e.m = nil
		e.expectExit = false
		e.d.Machine = rec
		Fault(FaultHibernateSaved)
		return nil
	})
}

// Wake restores a hibernated desktop.
func (m *Manager) Wake(ctx context.Context, id string) (Desktop, error) {
	// A woken desktop holds memory again: it reserves like a create, and
	// holds the reservation until its record says running (and counts).
	if e, err := m.lookup(id); err == nil {
		if !e.snapshot().State.Holds() {
			if err := m.cpu.admit(ctx, "wake"); err != nil {
				return e.snapshot(), err
			}
		}
		release, err := m.capacity.reserveComeback(e.snapshot(), "wake")
		if err != nil {
			return e.snapshot(), err
		}
		defer release()
	}
	var woken Machine
	d, err := m.transition(ctx, id, "wake", StateRunning, func(e *entry) error {
		d := e.snapshot()
		if d.State != StateHibernated {
			return &TransitionError{ID: id, From: d.State, Action: "wake"}
		}
		rctx, cancel := context.WithTimeout(m.base, 2*time.Minute)
		defer cancel()
		mach, err := m.drv.Restore(rctx, RestoreSpec{ID: id, Hibernated: d.Machine})
		if err != nil {
			return err
		}
		woken = mach
		Fault(FaultWakeRestored)
		e.mu.Lock()
		e.m = mach
		e.d.Machine = mach.Record()
		e.d.GuestPending = true
		e.guest.ready = newGuestReady()
		e.mu.Unlock()
		// A woken desktop slept for a while: its clock needs setting again
		// (to the host's, plus the offset a create or reset asked for).
		m.machineUp(e, mach, true, nil)
		return nil
	})
	// Only now that the record names the running machine may its guest
	// run and the state it woke from go: until then, recovery wakes the
	// desktop from that state again. Under the desktop's op lock, so a
	// hibernate cannot come between.
	if c, ok := woken.(Committer); ok && err == nil {
		if e, lerr := m.lookup(id); lerr == nil {
			e.op.Lock()
			e.mu.Lock()
			current := e.m == woken
			e.mu.Unlock()
			if current {
				if cerr := c.Committed(ctx); cerr != nil {
					m.log.Error("woken desktop's guest not started", "desktop", id, "err", cerr)
					err = fmt.Errorf("wake %s: %w", id, cerr)
				}
			}
			e.op.Unlock()
		}
	}
	return d, err
}

// Delete ends a desktop and removes everything it owned. Deleting a
// deleted or unknown desktop is ErrNotFound.
func (m *Manager) Delete(ctx context.Context, id string) error {
	e, err := m.lookup(id)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	if e.d.State == StateDeleted {
		e.mu.Unlock()
		return fmt.Errorf("%w: desktop %q", ErrNotFound, id)
	}
	mach := e.m
	before := e.d
	e.expectExit = true
	e.d.State = StateStopping
	d := e.d
	e.mu.Unlock()
	m.vols.releaseVolumes(m.base, before, mach)
	m.store.PutDesktop(d)
	m.publish(EventState, d)
	if m.obs != nil && mach != nil {
		m.obs.MachineDown(id)
	}
	dctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	var derr error
	if mach != nil {
		derr = mach.Destroy(dctx)
	} else {
		derr = m.drv.Cleanup(dctx, d.Machine)
	}
	if derr != nil {
		e.mu.Lock()
		e.d.State = StateFailed
		e.d.Reason = "delete failed: " + derr.Error()
		d = e.d
		e.mu.Unlock()
		m.store.PutDesktop(d)
		m.publish(EventState, d)
		return fmt.Errorf("delete %s: %w", id, derr)
	}
	e.mu.Lock()
	e.m = nil
	e.d.State = StateDeleted
	d = e.d
	e.mu.Unlock()
	if err := m.store.DeleteDesktop(id); err != nil {
		return fmt.Errorf("delete %s: record: %w", id, err)
	}
	m.forget(id)
	if m.obs != nil {
		m.obs.Forget(id)
	}
	m.publish(EventDeleted, d)
	m.lineage.collect(d.Uses)
	return nil
}

// endMachine ends a desktop's machine, or cleans up what a hibernated or
// failed one left, under the op lock, for an operation that replaces it.
// On failure the desktop is recorded failed with the reason.
func (m *Manager) endMachine(e *entry, action string) error {
	e.mu.Lock()
	mach, rec, id := e.m, e.d.Machine, e.d.ID
	e.expectExit = true
	e.mu.Unlock()
	if m.obs != nil && mach != nil {
		m.obs.MachineDown(id)
	}
	ctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	var err error
	if mach != nil {
		err = mach.Destroy(ctx)
	} else if len(rec) > 0 {
		err = m.drv.Cleanup(ctx, rec)
	}
	e.mu.Lock()
	e.m = nil
	e.expectExit = false
	e.mu.Unlock()
	if err != nil {
		m.failed(e, action+": ending its machine failed: "+err.Error())
		return fmt.Errorf("%s %s: end its machine: %w", action, id, err)
	}
	return nil
}

// failed records a desktop failed with reason and returns it.
func (m *Manager) failed(e *entry, reason string) Desktop {
	e.mu.Lock()
	e.d.State = StateFailed
	e.d.Reason = reason
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record a failed desktop", "desktop", d.ID, "err", err)
	}
	m.publish(EventState, d)
	return d
}
