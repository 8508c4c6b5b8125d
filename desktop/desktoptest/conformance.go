package desktoptest

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Harness is what the conformance suite needs from a driver under test.
type Harness struct {
	// NewDriver returns the driver. The suite calls it again to play a
	// restart of hostd: the new driver must find the old one's machines.
	NewDriver func(t *testing.T) desktop.Driver
	// Catalog holds Snapshot, a golden snapshot the driver can restore.
	Catalog  *desktop.Catalog
	Snapshot string
	// NewStore returns the records store; called once per suite run.
	NewStore func(t *testing.T) desktop.Store
	// Kill ends a machine's process abruptly (SIGKILL for real drivers).
	Kill func(t *testing.T, m desktop.Machine)
	// Gone reports whether everything a machine record owned is gone
	// (process and files).
	Gone func(t *testing.T, record []byte) bool
	// Timeout bounds each operation; real drivers under TCG need seconds.
	Timeout time.Duration
	// Logger is optional.
	Logger *slog.Logger
}

// Run runs the lifecycle conformance suite through a Manager.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	s := &suite{h: h, store: h.NewStore(t)}
	s.drv = h.NewDriver(t)
	s.mgr = s.newManager(t, s.drv, desktop.DefaultLimits())
	t.Run("CreateWithoutPool", s.createWithoutPool)
	t.Run("CreateFromPool", s.createFromPool)
	t.Run("PauseResume", s.pauseResume)
	t.Run("HibernateWake", s.hibernateWake)
	t.Run("Fork3", s.fork3)
	t.Run("SnapshotThenCreate", s.snapshotThenCreate)
	t.Run("CapacityRefusedWhole", s.capacity)
	t.Run("KilledMachineFails", s.killed)
	t.Run("RestartFindsDesktops", s.restart)
	t.Run("NothingLeft", s.nothingLeft)
}

type suite struct {
	h     Harness
	drv   desktop.Driver
	mgr   *desktop.Manager
	store desktop.Store
}

func (s *suite) newManager(t *testing.T, drv desktop.Driver, limits desktop.Limits) *desktop.Manager {
	m := desktop.NewManager(context.Background(), desktop.Config{
		Driver: drv, Store: s.store, Catalog: s.h.Catalog, Logger: s.h.Logger, Limits: limits,
	})
	if err := m.Recover(s.ctx(t)); err != nil {
		t.Fatalf("recover: %v", err)
	}
	return m
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) create(t *testing.T) desktop.Desktop {
	t.Helper()
	d, err := s.mgr.Create(s.ctx(t), desktop.CreateRequest{Snapshot: s.h.Snapshot})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if d.State != desktop.StateRunning {
		t.Fatalf("created desktop is %s, want running", d.State)
	}
	return d
}

func (s *suite) remove(t *testing.T, id string) {
	t.Helper()
	if err := s.mgr.Delete(s.ctx(t), id); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
	if _, err := s.mgr.Get(id); !errors.Is(err, desktop.ErrNotFound) {
		t.Fatalf("after delete, get %s: %v, want ErrNotFound", id, err)
	}
}

// screenOK checks the desktop's machine answers with a non-blank screen.
func (s *suite) screenOK(t *testing.T, id string) {
	t.Helper()
	m, _, err := s.mgr.Machine(s.ctx(t), id, false)
	if err != nil {
		t.Fatalf("machine of %s: %v", id, err)
	}
	img, err := m.Screendump(s.ctx(t))
	if err != nil {
		t.Fatalf("screendump %s: %v", id, err)
	}
	if uniform(img) {
		t.Fatalf("desktop %s shows a blank screen", id)
	}
}

func uniform(img image.Image) bool {
	b := img.Bounds()
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}

func (s *suite) createWithoutPool(t *testing.T) {
	if w, ok := s.drv.(desktop.Warmer); ok {
		snap, _ := s.h.Catalog.Get(s.h.Snapshot)
		w.Warm(snap, 0)
	}
	d := s.create(t)
	s.screenOK(t, d.ID)
	s.remove(t, d.ID)
}

func (s *suite) createFromPool(t *testing.T) {
	w, ok := s.drv.(desktop.Warmer)
	if !ok {
		t.Skip("driver keeps no warm pool")
	}
	snap, err := s.h.Catalog.Get(s.h.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	w.Warm(snap, 1)
	if err := w.WaitPool(s.ctx(t), snap.Name, 1); err != nil {
		t.Fatal(err)
	}
	d := s.create(t)
	if got := w.PoolSize(snap.Name); got != 0 {
		t.Errorf("pool holds %d after the create took its machine, want 0 (until it refills)", got)
	}
	s.screenOK(t, d.ID)
	w.Warm(snap, 0)
	s.remove(t, d.ID)
}

func (s *suite) pauseResume(t *testing.T) {
	d := s.create(t)
	defer s.remove(t, d.ID)
	ctx := s.ctx(t)
	if _, err := s.mgr.Resume(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("resume of a running desktop: %v, want ErrConflict", err)
	}
	p, err := s.mgr.Pause(ctx, d.ID)
	if err != nil || p.State != desktop.StatePaused {
		t.Fatalf("pause: %v, state %s", err, p.State)
	}
	if _, err := s.mgr.Pause(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("pause of a paused desktop: %v, want ErrConflict", err)
	}
	s.screenOK(t, d.ID) // the screen stays available while paused
	r, err := s.mgr.Resume(ctx, d.ID)
	if err != nil || r.State != desktop.StateRunning {
		t.Fatalf("resume: %v, state %s", err, r.State)
	}
}

func (s *suite) hibernateWake(t *testing.T) {
	d := s.create(t)
	defer s.remove(t, d.ID)
	ctx := s.ctx(t)
	h, err := s.mgr.Hibernate(ctx, d.ID)
	if err != nil || h.State != desktop.StateHibernated {
		t.Fatalf("hibernate: %v, state %s", err, h.State)
	}
	if _, _, err := s.mgr.Machine(ctx, d.ID, false); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("machine of a hibernated desktop: %v, want ErrConflict", err)
	}
	if _, err := s.mgr.Fork(ctx, d.ID, 1); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("fork of a hibernated desktop: %v, want ErrConflict", err)
	}
	if _, err := s.mgr.Pause(ctx, d.ID); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("pause of a hibernated desktop: %v, want ErrConflict", err)
	}
	w, err := s.mgr.Wake(ctx, d.ID)
	if err != nil || w.State != desktop.StateRunning {
		t.Fatalf("wake: %v, state %s", err, w.State)
	}
	s.screenOK(t, d.ID)
}

func (s *suite) fork3(t *testing.T) {
	src := s.create(t)
	defer s.remove(t, src.ID)
	copies, err := s.mgr.Fork(s.ctx(t), src.ID, 3)
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
		s.screenOK(t, c.ID)
	}
	if got, _ := s.mgr.Get(src.ID); got.State != desktop.StateRunning {
		t.Errorf("source is %s after the fork, want running", got.State)
	}
	s.screenOK(t, src.ID)
	for _, c := range copies {
		s.remove(t, c.ID)
	}
}

func (s *suite) snapshotThenCreate(t *testing.T) {
	src := s.create(t)
	name := "conformance-" + desktop.NewID("")[:8]
	snap, err := s.mgr.Snapshot(s.ctx(t), src.ID, name)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Manifest.Parent != s.h.Snapshot || snap.Manifest.Source != src.ID {
		t.Errorf("manifest parent %q source %q", snap.Manifest.Parent, snap.Manifest.Source)
	}
	if _, err := s.mgr.Snapshot(s.ctx(t), src.ID, name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("second snapshot under the same name: %v, want ErrConflict", err)
	}
	d, err := s.mgr.Create(s.ctx(t), desktop.CreateRequest{Snapshot: name})
	if err != nil {
		t.Fatalf("create from the new snapshot: %v", err)
	}
	s.screenOK(t, d.ID)
	if err := s.mgr.RemoveSnapshot(name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("remove a snapshot in use: %v, want ErrConflict", err)
	}
	s.remove(t, d.ID)
	// The source still runs on a disk layered on the snapshot, so it too
	// keeps the snapshot.
	s.screenOK(t, src.ID)
	if err := s.mgr.RemoveSnapshot(name); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("remove a snapshot its source desktop layers on: %v, want ErrConflict", err)
	}
	s.remove(t, src.ID)
	if err := s.mgr.RemoveSnapshot(name); err != nil {
		t.Errorf("remove an unused snapshot: %v", err)
	}
}

func (s *suite) capacity(t *testing.T) {
	limits := desktop.DefaultLimits()
	limits.MaxDesktops = 1
	m := desktop.NewManager(context.Background(), desktop.Config{Driver: s.drv, Store: NewMemStore(), Catalog: s.h.Catalog, Limits: limits})
	d, err := m.Create(s.ctx(t), desktop.CreateRequest{Snapshot: s.h.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(s.ctx(t), desktop.CreateRequest{Snapshot: s.h.Snapshot}); !errors.Is(err, desktop.ErrCapacity) {
		t.Fatalf("create over the cap: %v, want ErrCapacity", err)
	}
	if _, err := m.Fork(s.ctx(t), d.ID, 2); !errors.Is(err, desktop.ErrCapacity) {
		t.Fatalf("fork over the cap: %v, want ErrCapacity", err)
	}
	if n := len(m.List()); n != 1 {
		t.Fatalf("%d desktops after refused creates, want 1", n)
	}
	if err := m.Delete(s.ctx(t), d.ID); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []desktop.CreateRequest{
		{Snapshot: "no-such-snapshot"},
		{Snapshot: s.h.Snapshot, TTL: -time.Second},
		{Snapshot: s.h.Snapshot, TTL: 10 * 365 * 24 * time.Hour},
		{Snapshot: s.h.Snapshot, CPUs: 63},
		{Snapshot: s.h.Snapshot, Name: "Not A Name"},
	} {
		if _, err := m.Create(s.ctx(t), bad); err == nil {
			t.Errorf("create %+v succeeded, want an error", bad)
		}
	}
	if n := len(m.List()); n != 0 {
		t.Fatalf("%d desktops after invalid creates, want 0", n)
	}
}

func (s *suite) killed(t *testing.T) {
	d := s.create(t)
	m, _, err := s.mgr.Machine(s.ctx(t), d.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	events, stop := s.mgr.Subscribe()
	defer stop()
	s.h.Kill(t, m)
	ctx := s.ctx(t)
	for {
		select {
		case ev := <-events:
			if ev.Desktop.ID != d.ID || ev.Desktop.State != desktop.StateFailed {
				continue
			}
			if ev.Desktop.Reason == "" {
				t.Error("failed desktop has no reason")
			}
			if !s.h.Gone(t, ev.Desktop.Machine) {
				t.Error("a killed desktop's files remain")
			}
			s.remove(t, d.ID)
			return
		case <-ctx.Done():
			t.Fatalf("desktop %s did not fail after its machine was killed", d.ID)
		}
	}
}

func (s *suite) restart(t *testing.T) {
	var ids []string
	for range 3 {
		ids = append(ids, s.create(t).ID)
	}
	if _, err := s.mgr.Pause(s.ctx(t), ids[1]); err != nil {
		t.Fatal(err)
	}
	// A new driver and Manager on the same store: hostd restarted.
	s.mgr.Close()
	if c, ok := s.drv.(interface{ Close() }); ok {
		c.Close()
	}
	s.drv = s.h.NewDriver(t)
	s.mgr = s.newManager(t, s.drv, desktop.DefaultLimits())
	want := map[string]desktop.State{ids[0]: desktop.StateRunning, ids[1]: desktop.StatePaused, ids[2]: desktop.StateRunning}
	for id, st := range want {
		d, err := s.mgr.Get(id)
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if d.State != st {
			t.Errorf("after restart %s is %s, want %s", id, d.State, st)
		}
		s.screenOK(t, id)
	}
	if _, err := s.mgr.Resume(s.ctx(t), ids[1]); err != nil {
		t.Errorf("resume after restart: %v", err)
	}
	for _, id := range ids {
		s.remove(t, id)
	}
}

func (s *suite) nothingLeft(t *testing.T) {
	if n := len(s.mgr.List()); n != 0 {
		t.Errorf("%d desktops remain: %v", n, s.mgr.List())
	}
	records, _ := s.store.LoadDesktops()
	if len(records) != 0 {
		t.Errorf("%d records remain: %+v", len(records), records)
	}
	snaps, _, _ := s.h.Catalog.List()
	for _, sn := range snaps {
		if sn.Manifest.Ephemeral {
			t.Errorf("fork template %s remains", sn.Name)
		}
	}
}

// Describe formats a desktop for failure messages.
func Describe(d desktop.Desktop) string {
	return fmt.Sprintf("%s (%s, %s)", d.ID, d.State, d.Reason)
}
