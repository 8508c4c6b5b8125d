// Watching machines: a machine that ends or halts (its disk bound crossed)
// on its own marks its desktop failed or paused.

package desktop

import (
	"context"
	"time"
)

// halt records that mach paused its running desktop on its own.
func (m *Manager) halt(e *entry, mach Machine, reason string) {
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	id := e.d.ID
	if e.m != mach || e.d.State != StateRunning {
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// The machine stopped its guest at once; stopped again here, under
	// the op lock, since an operation in between (a snapshot) may have
	// started it again.
	ctx, cancel := context.WithTimeout(m.base, 30*time.Second)
	err := mach.Pause(ctx)
	cancel()
	if err != nil {
		m.log.Error("pause a desktop that halted", "desktop", id, "err", err)
		return
	}
	e.mu.Lock()
	e.d.State = StatePaused
	e.d.Reason = reason
	d := e.d
	e.mu.Unlock()
	m.log.Warn("desktop paused itself", "desktop", d.ID, "reason", reason)
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record a paused desktop", "desktop", d.ID, "err", err)
	}
	m.publish(EventState, d)
}

// watch notices a machine that ends on its own: the desktop fails with the
// reason and its files are removed at once. A machine that pauses itself
// (a Halter) leaves its desktop paused with the reason.
func (m *Manager) watch(e *entry, mach Machine) {
	var halted <-chan string
	if h, ok := mach.(Halter); ok {
		halted = h.Halted()
	}
	for done := false; !done; {
		select {
		case <-mach.Exited():
			done = true
		case reason := <-halted:
			m.halt(e, mach, reason)
		case <-m.closed:
			return
		}
	}
	select {
	case <-m.closed:
		return
	default:
	}
	e.mu.Lock()
	if e.m != mach || e.expectExit {
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// Another operation may hold op; the failure waits for it.
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	if e.m != mach || e.expectExit {
		e.mu.Unlock()
		return
	}
	e.m = nil
	e.d.State = StateFailed
	e.d.Reason = "its QEMU process " + mach.ExitReason()
	rec := e.d.Machine
	d := e.d
	e.mu.Unlock()
	m.log.Warn("desktop failed", "desktop", d.ID, "reason", d.Reason)
	if m.obs != nil {
		m.obs.MachineDown(d.ID)
	}
	ctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	if err := m.drv.Cleanup(ctx, rec); err != nil {
		m.log.Warn("cleanup of failed desktop", "desktop", d.ID, "err", err)
	}
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record failed desktop", "desktop", d.ID, "err", err)
	}
	m.publish(EventState, d)
}
