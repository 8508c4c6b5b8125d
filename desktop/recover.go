package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Recover loads the store after hostd starts: live machines are found
// again, machines that died meanwhile are marked failed and their files
// removed, and operations a crash interrupted are finished. Nothing that
// was running is lost by a restart of hostd alone.
func (m *Manager) Recover(ctx context.Context) error {
	records, err := m.store.LoadDesktops()
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, d := range records {
		m.recoverOne(ctx, d)
	}
	m.sweep(ctx)
	m.lineage.recover()
	m.kickTTL()
	go m.verifyAll()
	return nil
}

// verifyAll checksums every golden snapshot once, in the background, so
// the first create from each does not pay for it.
func (m *Manager) verifyAll() {
	snaps, _, err := m.catalog.List()
	if err != nil {
		return
	}
	for _, s := range snaps {
		if err := m.catalog.Verify(s); err != nil {
			m.log.Warn("snapshot does not match its manifest", "snapshot", s.Name, "err", err)
		}
	}
}

func (m *Manager) recoverOne(ctx context.Context, d Desktop) {
	log := m.log.With("desktop", d.ID)
	cleanup := func() {
		if len(d.Machine) == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := m.drv.Cleanup(cctx, d.Machine); err != nil {
			log.Warn("cleanup", "err", err)
		}
	}
	e := &entry{d: d, guest: guestState{ready: newGuestReady()}}
	if s := e.d.Setup; s != nil && s.State == SetupRunning {
		e.d.Setup = &Setup{State: SetupFailed, Commands: s.Commands, Error: "hostd stopped while the on_create commands ran: some may have run, some not"}
		m.store.PutDesktop(e.d)
	}
	switch d.State {
	case StateCreating, StateStopping, StateDeleted:
		// Interrupted half-way: finish by removing it.
		cleanup()
		m.store.DeleteDesktop(d.ID)
		log.Info("removed a desktop a crash left half-made or half-deleted", "state", d.State)
		return
	case StateRunning, StatePaused:
		if d.Driver != m.drv.Name() {
			log.Warn("desktop belongs to another driver; left alone", "driver", d.Driver)
			break
		}
		mach, err := m.drv.Attach(ctx, d.Machine)
		var hib *HibernatedError
		if errors.As(err, &hib) {
			// Hibernated whole; only the record was not written.
			e.d.State = StateHibernated
			e.d.Machine = hib.Record
			e.d.Reason = ""
			if err := m.store.PutDesktop(e.d); err != nil {
				log.Error("record a desktop found hibernated", "err", err)
			}
			log.Info("found hibernated: a crash came between its hibernation and its record")
			break
		}
		if err != nil {
			e.d.State = StateFailed
			e.d.Reason = "its machine ended while hostd was not running: " + err.Error()
			cleanup()
			m.store.PutDesktop(e.d)
			log.Warn("desktop failed while hostd was down", "err", err)
			break
		}
		e.m = mach
		// The machine may have moved on from its record (a snapshot a crash
		// cut short switched its disk to a new overlay), and a snapshot it
		// made may be committed without the record using it. Written
		// before a stopped guest resumes: a move the crash cut short may
		// have handed the record to another host, which then runs it.
		e.d.Machine = mach.Record()
		e.d.Uses = m.lineage.usesOf(e.d)
		if err := m.store.PutDesktop(e.d); errors.Is(err, ErrNotHere) {
			log.Warn("a desktop moved to another host while hostd was down; its machine here ends", "err", err)
			if derr := mach.Destroy(ctx); derr != nil {
				log.Warn("end the machine of a desktop that moved away", "err", derr)
			}
			return
		} else if err != nil {
			log.Error("record a reattached desktop", "err", err)
		}
		if d.State == StateRunning {
			m.resumeStopped(ctx, mach, log)
		}
		m.mu.Lock()
		m.desktops[d.ID] = e
		m.mu.Unlock()
		// The guest was set up before the restart, unless the restart cut
		// that short: then a running desktop's is set up now, a paused
		// one's when it resumes.
		m.machineUp(e, mach, d.GuestPending && d.State == StateRunning, nil)
		log.Info("reattached", "state", d.State)
		return
	}
	m.mu.Lock()
	m.desktops[d.ID] = e
	m.mu.Unlock()
}

func (m *Manager) kickTTL() {
	select {
	case m.ttlKick <- struct{}{}:
	default:
	}
}

// Run deletes desktops whose TTL has passed, and runs the CPU admission's
// gauge, until ctx ends. It waits on a timer set to the next expiry, and
// is woken when desktops change.
func (m *Manager) Run(ctx context.Context) {
	go m.cpu.Run(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := m.expireDue(ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.ttlKick:
		}
	}
}

// expireDue deletes expired desktops that no request is using, writes the
// ends that uses moved, and returns the next expiry.
func (m *Manager) expireDue(ctx context.Context) time.Time {
	now := m.now()
	var next time.Time
	for _, d := range m.List() {
		if d.ExpiresAt == nil || d.State == StateStopping || d.State == StateDeleted {
			continue
		}
		e, err := m.lookup(d.ID)
		if err != nil {
			continue
		}
		if !d.ExpiresAt.After(now) {
			if e.busy() {
				continue // the request's end wakes the sweeper again
			}
			m.log.Info("desktop TTL passed; deleting", "desktop", d.ID, "last_used_at", d.LastUsedAt)
			if err := m.Delete(ctx, d.ID); err != nil {
				m.log.Warn("delete expired desktop", "desktop", d.ID, "err", err)
			}
			continue
		}
		m.saveMovedExpiry(e, d)
		if next.IsZero() || d.ExpiresAt.Before(next) {
			next = *d.ExpiresAt
		}
	}
	return next
}

func (e *entry) busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inUse > 0
}

// saveMovedExpiry writes d's record when uses have moved its end a minute
// or more past what the record says, so a restarted hostd keeps most of
// the time they bought without a write on every use.
func (m *Manager) saveMovedExpiry(e *entry, d Desktop) {
	e.mu.Lock()
	if e.savedExpiry.IsZero() {
		e.savedExpiry = *d.ExpiresAt // what create or the last write recorded
	}
	moved := d.ExpiresAt.Sub(e.savedExpiry) >= time.Minute
	if moved {
		e.savedExpiry = *d.ExpiresAt
	}
	e.mu.Unlock()
	if !moved {
		return
	}
	if err := m.setup.putBeside(e, d); err != nil {
		m.log.Warn("record a desktop's moved expiry", "desktop", d.ID, "err", err)
	}
}

// sweep asks a sweeping driver to end the machines no record owns (run
// before the pools warm, so none of theirs is in flight).
func (m *Manager) sweep(ctx context.Context) {
	sw, ok := m.drv.(Sweeper)
	if !ok {
		return
	}
	var owned []json.RawMessage
	m.mu.Lock()
	for _, e := range m.desktops {
		if d := e.snapshot(); len(d.Machine) > 0 {
			owned = append(owned, d.Machine)
		}
	}
	m.mu.Unlock()
	swept, err := sw.Sweep(ctx, owned)
	if err != nil {
		m.log.Warn("sweep machines no record owns", "err", err)
	}
	if len(swept) > 0 {
		m.log.Warn("ended machines no desktop record owned (a crash left them)", "machines", swept)
	}
}

// resumeStopped continues a machine whose record says running but whose
// CPUs are stopped: a fork or snapshot of it was cut short by a crash.
func (m *Manager) resumeStopped(ctx context.Context, mach Machine, log *slog.Logger) {
	st, ok := mach.(Stopper)
	if !ok {
		return
	}
	stopped, err := st.Stopped(ctx)
	if err != nil || !stopped {
		return
	}
	if err := mach.Resume(ctx); err != nil {
		log.Warn("a desktop a crash left stopped does not resume", "err", err)
		return
	}
	log.Warn("resumed a desktop a crash left stopped (a fork or snapshot of it was cut short)")
}
