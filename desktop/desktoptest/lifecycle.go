package desktoptest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// The lifecycle checks: what the Manager asks of every driver.

func createWithoutPool(t *testing.T, h Harness) {
	limits := desktop.DefaultLimits()
	limits.PoolSize = 0
	e := openWith(t, h, h.Catalog, limits)
	d := e.create(t)
	e.screenOK(t, d.ID)
	e.remove(t, d.ID)
}

func createFromPool(t *testing.T, h Harness) {
	e := open(t, h)
	w, ok := e.drv.(desktop.Warmer)
	if !ok {
		t.Skip("the driver keeps no warm pool (it is no desktop.Warmer)")
	}
	snap, err := e.catalog.Get(h.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	w.Warm(snap, 1) // instead of the Manager's default, which Recover set
	if err := w.WaitPool(e.ctx(t), snap.Name, 1); err != nil {
		t.Fatal(err)
	}
	d := e.create(t)
	if got := w.PoolSize(snap.Name); got != 0 {
		t.Errorf("pool holds %d after the create took its machine, want 0 (until it refills)", got)
	}
	e.screenOK(t, d.ID)
	w.Warm(snap, 0)
	e.remove(t, d.ID)
}

func pauseResume(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	ctx := e.ctx(t)
	if _, err := e.mgr.Resume(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("resume of a running desktop: %v, want ErrConflict", err)
	}
	p, err := e.mgr.Pause(ctx, d.ID)
	if err != nil || p.State != desktop.StatePaused {
		t.Fatalf("pause: %v, state %s", err, p.State)
	}
	if _, err := e.mgr.Pause(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("pause of a paused desktop: %v, want ErrConflict", err)
	}
	e.screenOK(t, d.ID) // the screen stays available while paused
	r, err := e.mgr.Resume(ctx, d.ID)
	if err != nil || r.State != desktop.StateRunning {
		t.Fatalf("resume: %v, state %s", err, r.State)
	}
	e.remove(t, d.ID)
}

func hibernateWake(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	ctx := e.ctx(t)
	hb, err := e.mgr.Hibernate(ctx, d.ID)
	if err != nil || hb.State != desktop.StateHibernated {
		t.Fatalf("hibernate: %v, state %s", err, hb.State)
	}
	if _, _, err := e.mgr.Machine(ctx, d.ID, desktop.WaitNone); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("machine of a hibernated desktop: %v, want ErrConflict", err)
	}
	if _, err := e.mgr.Lineage().Fork(ctx, d.ID, 1); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("fork of a hibernated desktop: %v, want ErrConflict", err)
	}
	if _, err := e.mgr.Pause(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("pause of a hibernated desktop: %v, want ErrConflict", err)
	}
	w, err := e.mgr.Wake(ctx, d.ID)
	if err != nil || w.State != desktop.StateRunning {
		t.Fatalf("wake: %v, state %s", err, w.State)
	}
	e.screenOK(t, d.ID)
	e.guestAlive(t, d.ID)
	e.remove(t, d.ID)
}

func fork3(t *testing.T, h Harness) {
	e := open(t, h)
	src := e.create(t)
	copies, err := e.mgr.Lineage().Fork(e.ctx(t), src.ID, 3)
	if err != nil {
		t.Fatalf("fork 3: %v", err)
	}
	if len(copies) != 3 {
		t.Fatalf("fork 3 made %d copies", len(copies))
	}
	seen := map[string]bool{src.ID: true}
	for _, c := range copies {
		if seen[c.ID] {
			t.Errorf("fork copy id %s repeats", c.ID)
		}
		seen[c.ID] = true
		if c.State != desktop.StateRunning || c.ForkOf != src.ID {
			t.Errorf("copy %s: state %s fork_of %q", c.ID, c.State, c.ForkOf)
		}
		e.screenOK(t, c.ID)
	}
	if got, _ := e.mgr.Get(src.ID); got.State != desktop.StateRunning {
		t.Errorf("source is %s after the fork, want running", got.State)
	}
	e.screenOK(t, src.ID)
	for _, c := range copies {
		e.remove(t, c.ID)
	}
	e.remove(t, src.ID)
}

// A paused desktop forks, stays paused, forks again and resumes. (Under
// QEMU a completed migration leaves the source's disks inactive, and a
// second freeze of an inactive disk would abort it.)
func forkPausedTwice(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	if _, err := e.mgr.Pause(e.ctx(t), d.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		copies, err := e.mgr.Lineage().Fork(e.ctx(t), d.ID, 1)
		if err != nil {
			t.Fatalf("fork %d of a paused desktop: %v", i+1, err)
		}
		if got, _ := e.mgr.Get(d.ID); got.State != desktop.StatePaused {
			t.Fatalf("after fork %d the source is %s, want paused", i+1, got.State)
		}
		e.guestAlive(t, copies[0].ID)
		e.remove(t, copies[0].ID)
	}
	if _, err := e.mgr.Resume(e.ctx(t), d.ID); err != nil {
		t.Fatalf("resume after two forks: %v", err)
	}
	e.guestAlive(t, d.ID)
	e.remove(t, d.ID)
}

func snapshotThenCreate(t *testing.T, h Harness) {
	e := open(t, h)
	src := e.create(t)
	name := "conformance-" + desktop.NewID("")[:8]
	snap, err := e.mgr.Lineage().Snapshot(e.ctx(t), src.ID, name)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Manifest.Parent != h.Snapshot || snap.Manifest.Source != src.ID {
		t.Errorf("manifest parent %q source %q", snap.Manifest.Parent, snap.Manifest.Source)
	}
	if _, err := e.mgr.Lineage().Snapshot(e.ctx(t), src.ID, name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("second snapshot under the same name: %v, want ErrConflict", err)
	}
	d, err := e.mgr.Create(e.ctx(t), desktop.CreateRequest{Snapshot: name})
	if err != nil {
		t.Fatalf("create from the new snapshot: %v", err)
	}
	e.screenOK(t, d.ID)
	if err := e.mgr.Lineage().RemoveSnapshot(name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("remove a snapshot in use: %v, want ErrConflict", err)
	}
	e.remove(t, d.ID)
	// The source still runs on a disk layered on the snapshot, so it too
	// keeps the snapshot.
	e.screenOK(t, src.ID)
	if err := e.mgr.Lineage().RemoveSnapshot(name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("remove a snapshot its source desktop layers on: %v, want ErrConflict", err)
	}
	e.remove(t, src.ID)
	if err := e.mgr.Lineage().RemoveSnapshot(name); err != nil {
		t.Errorf("remove an unused snapshot: %v", err)
	}
}

func capacity(t *testing.T, h Harness) {
	limits := desktop.DefaultLimits()
	limits.MaxDesktops = 1
	e := openWith(t, h, h.Catalog, limits)
	d := e.create(t)
	if _, err := e.mgr.Create(e.ctx(t), desktop.CreateRequest{Snapshot: h.Snapshot}); !errors.Is(err, desktop.ErrCapacity) {
		t.Fatalf("create over the cap: %v, want ErrCapacity", err)
	}
	if _, err := e.mgr.Lineage().Fork(e.ctx(t), d.ID, 2); !errors.Is(err, desktop.ErrCapacity) {
		t.Fatalf("fork over the cap: %v, want ErrCapacity", err)
	}
	if n := len(e.mgr.List()); n != 1 {
		t.Fatalf("%d desktops after refused creates, want 1", n)
	}
	e.remove(t, d.ID)
	for _, bad := range []desktop.CreateRequest{
		{Snapshot: "no-such-snapshot"},
		{Snapshot: h.Snapshot, TTL: -time.Second},
		{Snapshot: h.Snapshot, TTL: 10 * 365 * 24 * time.Hour},
		{Snapshot: h.Snapshot, CPUs: 63},
		{Snapshot: h.Snapshot, Name: "Not A Name"},
	} {
		if _, err := e.mgr.Create(e.ctx(t), bad); err == nil {
			t.Errorf("create %+v succeeded, want an error", bad)
		}
	}
}

func killed(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	m := e.machine(t, d.ID)
	events, stop := e.mgr.Events().Subscribe()
	defer stop()
	h.Kill(t, m)
	ctx := e.ctx(t)
	for {
		select {
		case ev := <-events:
			if ev.Desktop.ID != d.ID || ev.Desktop.State != desktop.StateFailed {
				continue
			}
			if ev.Desktop.Reason == "" {
				t.Error("failed desktop has no reason")
			}
			if !h.Gone(t, ev.Desktop.Machine) {
				t.Error("a killed desktop's files remain")
			}
			e.remove(t, d.ID)
			return
		case <-ctx.Done():
			t.Fatalf("desktop %s did not fail after its machine was killed", d.ID)
		}
	}
}

func restart(t *testing.T, h Harness) {
	e := open(t, h)
	var ids []string
	for range 3 {
		ids = append(ids, e.create(t).ID)
	}
	if _, err := e.mgr.Pause(e.ctx(t), ids[1]); err != nil {
		t.Fatal(err)
	}
	e.restart(t)
	want := map[string]desktop.State{ids[0]: desktop.StateRunning, ids[1]: desktop.StatePaused, ids[2]: desktop.StateRunning}
	for id, st := range want {
		d, err := e.mgr.Get(id)
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if d.State != st {
			t.Errorf("after restart %s is %s, want %s", id, d.State, st)
		}
		e.screenOK(t, id)
	}
	if _, err := e.mgr.Resume(e.ctx(t), ids[1]); err != nil {
		t.Errorf("resume after restart: %v", err)
	}
	e.guestAlive(t, ids[1])
	for _, id := range ids {
		e.remove(t, id)
	}
}

// A machine started but never recorded (hostd killed between a create's
// restore and its record) is ended by the next start, and recorded
// desktops are not touched.
func restartSweeps(t *testing.T, h Harness) {
	e := open(t, h)
	if _, ok := e.drv.(desktop.Sweeper); !ok {
		t.Skip("the driver keeps no machines a record does not name")
	}
	kept := e.create(t)
	snap, err := e.catalog.Get(h.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := e.drv.Restore(e.ctx(t), desktop.RestoreSpec{ID: desktop.NewID("d-"), Snapshot: snap})
	if err != nil {
		t.Fatalf("restore without a record: %v", err)
	}
	record := orphan.Record()
	e.restart(t)
	// The old driver is closed, so the orphan's own Exited may never hear
	// of its end: Gone asks the host (process or domain, and files).
	if h.Gone != nil {
		deadline := time.Now().Add(h.Timeout)
		for !h.Gone(t, record) {
			if time.Now().After(deadline) {
				t.Fatal("the machine no record names, or its files, remain after a restart")
			}
			select {
			case <-orphan.Exited():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if d, err := e.mgr.Get(kept.ID); err != nil || d.State != desktop.StateRunning {
		t.Fatalf("the recorded desktop after the sweep: %v %v", d.State, err)
	}
	e.screenOK(t, kept.ID)
	e.remove(t, kept.ID)
}

// A desktop whose record says running but whose CPUs a crash left stopped
// (mid-fork, mid-snapshot) runs again after a restart.
func restartResumes(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	mach, _, err := e.mgr.Machine(e.ctx(t), d.ID, desktop.WaitNone)
	if err != nil {
		t.Fatal(err)
	}
	stopper, ok := mach.(desktop.Stopper)
	if !ok {
		e.remove(t, d.ID)
		t.Skip("the driver's machines cannot say whether they are stopped")
	}
	if err := mach.Pause(e.ctx(t)); err != nil { // behind the Manager's back, as a cut-short fork leaves it
		t.Fatal(err)
	}
	if stopped, err := stopper.Stopped(e.ctx(t)); err != nil || !stopped {
		t.Fatalf("a paused machine says stopped=%v (%v)", stopped, err)
	}
	e.restart(t)
	if got, _ := e.mgr.Get(d.ID); got.State != desktop.StateRunning {
		t.Fatalf("after restart the desktop is %s, want running", got.State)
	}
	mach, _, err = e.mgr.Machine(e.ctx(t), d.ID, desktop.WaitNone)
	if err != nil {
		t.Fatal(err)
	}
	if stopped, err := mach.(desktop.Stopper).Stopped(e.ctx(t)); err != nil || stopped {
		t.Fatalf("after restart the machine says stopped=%v (%v), want running", stopped, err)
	}
	e.guestAlive(t, d.ID)
	e.remove(t, d.ID)
}

// A reset goes back to the snapshot on a new machine and keeps the
// desktop's id and settings; from hibernation it comes back running; a
// person in control stops it. With a guest OS: what the guest wrote is
// gone, and the clock the create asked for is the clock again.
func resetToSnapshot(t *testing.T, h Harness) {
	e := open(t, h)
	ctx := e.ctx(t)
	start := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: e.h.Snapshot, Name: "reset-me", Clock: &start})
	if err != nil {
		t.Fatalf("create with a clock: %v", err)
	}
	if d.Clock == nil || !d.Clock.Equal(start) {
		t.Fatalf("create recorded clock %v, want %v", d.Clock, start)
	}
	guestClockNear(t, e, d.ID, start)
	if h.GuestOS {
		e.shell(t, d.ID, "echo dirty > /root/reset-marker && sync")
	}
	before := e.machine(t, d.ID)
	r, err := e.mgr.Lineage().Reset(ctx, d.ID, desktop.ResetRequest{})
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if r.ID != d.ID || r.Name != "reset-me" || r.State != desktop.StateRunning || r.Resets != 1 || r.ResetAt == nil {
		t.Fatalf("after reset: %s, resets %d, want %s running with 1 reset", Describe(r), r.Resets, d.ID)
	}
	if e.machine(t, d.ID) == before {
		t.Fatal("the reset desktop still has its old machine")
	}
	select {
	case <-before.Exited():
	default:
		t.Fatal("the old machine still runs after the reset")
	}
	e.screenOK(t, d.ID)
	e.guestAlive(t, d.ID)
	guestClockNear(t, e, d.ID, start)
	if h.GuestOS {
		if out := e.shell(t, d.ID, "test -e /root/reset-marker && echo kept || echo gone"); out != "gone" {
			t.Errorf("a file written before the reset is %s after it", out)
		}
		if out := e.shell(t, d.ID, "hostname"); out != d.ID {
			t.Errorf("hostname %q after the reset, want %s", out, d.ID)
		}
	}

	if _, err := e.mgr.Hibernate(ctx, d.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	later := start.Add(24 * time.Hour)
	r, err = e.mgr.Lineage().Reset(ctx, d.ID, desktop.ResetRequest{Clock: &later})
	if err != nil || r.State != desktop.StateRunning || r.Resets != 2 {
		t.Fatalf("reset of a hibernated desktop: %v, state %s, resets %d", err, r.State, r.Resets)
	}
	e.guestAlive(t, d.ID)
	guestClockNear(t, e, d.ID, later)

	if _, err := e.mgr.SetControl(d.ID, desktop.ControlPerson, "ana"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mgr.Lineage().Reset(ctx, d.ID, desktop.ResetRequest{}); !errors.Is(err, desktop.ErrControlled) {
		t.Fatalf("reset while a person holds control: %v, want ErrControlled", err)
	}
	e.remove(t, d.ID)
}

// guestClockNear checks that a desktop's guest clock reads want, give or
// take the time since it was set (a few seconds under TCG). Without a
// guest OS it checks the recorded offset instead.
func guestClockNear(t *testing.T, e *env, id string, want time.Time) {
	t.Helper()
	d, err := e.mgr.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Now().Add(d.ClockOffset); got.Sub(want).Abs() > time.Minute {
		t.Errorf("desktop %s: recorded clock offset makes it %s, want about %s", id, got.Format(time.RFC3339), want.Format(time.RFC3339))
	}
	if !e.h.GuestOS {
		return
	}
	out := e.shell(t, id, "date +%s")
	secs, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("guest clock %q: %v", out, err)
	}
	// Set at most a minute ago (the set and every check since, under TCG),
	// and never before it was asked for.
	if got := time.Unix(secs, 0); got.Before(want.Add(-2*time.Second)) || got.After(want.Add(time.Minute)) {
		t.Errorf("desktop %s: guest clock %s, want %s (up to a minute later)", id, got.UTC().Format(time.RFC3339), want.Format(time.RFC3339))
	}
}
