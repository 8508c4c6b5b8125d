package desktop_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// setupOf waits for a desktop's on_create outcome.
func setupOf(t *testing.T, m *desktop.Manager, id string) desktop.Setup {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Setup != nil && d.Setup.State != desktop.SetupRunning {
			return *d.Setup
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup of %s still %+v", id, d.Setup)
		}
		// Exec waits for the guest, which waits for the setup: the
		// outcome is recorded by then.
		ctx, cancel := context.WithTimeout(context.Background(), time.Until(deadline))
		m.Machine(ctx, id, desktop.WaitSetUp)
		cancel()
	}
}

// onCreate runs the snapshot's commands after a create, in order, up to
// the first that fails, and records the outcome on the desktop, in the
// store and as an event; a fork and a wake do not run them again.
func TestOnCreate(t *testing.T) {
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := desktoptest.NewFake()
	ctx := context.Background()
	if _, err := desktoptest.BakeFake(ctx, f, cat, "good", "echo one", "echo two"); err != nil {
		t.Fatal(err)
	}
	if _, err := desktoptest.BakeFake(ctx, f, cat, "bad", "true", "exit 3", "echo never"); err != nil {
		t.Fatal(err)
	}
	store := desktoptest.NewMemStore()
	m := desktop.NewManager(ctx, desktop.Config{Driver: f, Store: store, Catalog: cat, Limits: desktop.DefaultLimits()})
	defer m.Close()
	events, stop := m.Events().Subscribe()
	defer stop()
	userShells := func(id string) []string {
		mach, _, err := m.Machine(ctx, id, desktop.WaitSetUp)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range mach.(*desktoptest.FakeMachine).Shells() {
			if !strings.Contains(s, "/etc/hostname") { // the clone's identity
				out = append(out, s)
			}
		}
		return out
	}

	good, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "good"})
	if err != nil {
		t.Fatal(err)
	}
	// The fake runs the commands at once, so they may be done before the
	// create answers.
	if good.Setup == nil || (good.Setup.State != desktop.SetupRunning && good.Setup.State != desktop.SetupDone) || good.Setup.Commands != 2 {
		t.Errorf("a create answers with setup %+v, want running (or already done), 2 commands", good.Setup)
	}
	if s := setupOf(t, m, good.ID); s.State != desktop.SetupDone || s.Commands != 2 || s.Failed != 0 {
		t.Errorf("setup %+v", s)
	}
	if got := userShells(good.ID); !slices.Equal(got, []string{"echo one", "echo two"}) {
		t.Errorf("ran %q", got)
	}

	bad, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	s := setupOf(t, m, bad.ID)
	if s.State != desktop.SetupFailed || s.Failed != 2 || s.Command != "exit 3" || s.ExitCode != 3 {
		t.Errorf("setup %+v, want command 2 (exit 3) failed", s)
	}
	if got := userShells(bad.ID); !slices.Equal(got, []string{"true", "exit 3"}) {
		t.Errorf("ran %q: the commands after a failure must not run", got)
	}
	recs, _ := store.LoadDesktops()
	for _, r := range recs {
		if r.ID == bad.ID && (r.Setup == nil || r.Setup.State != desktop.SetupFailed) {
			t.Errorf("the record says setup %+v", r.Setup)
		}
	}
	sawFailure := false
	for len(events) > 0 {
		ev := <-events
		if ev.Type == desktop.EventSetup && ev.Desktop.ID == bad.ID {
			sawFailure = strings.Contains(ev.Summary, "exit 3")
		}
	}
	if !sawFailure {
		t.Error("no desktop.setup event naming the failed command")
	}

	// A fork copies a desktop that ran them; a wake is the same desktop.
	forks, err := m.Lineage().Fork(ctx, good.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if forks[0].Setup != nil {
		t.Errorf("a fork has setup %+v", forks[0].Setup)
	}
	if got := userShells(forks[0].ID); len(got) != 0 {
		t.Errorf("a fork ran %q", got)
	}
	if _, err := m.Hibernate(ctx, good.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wake(ctx, good.ID); err != nil {
		t.Fatal(err)
	}
	if got := userShells(good.ID); len(got) != 0 {
		t.Errorf("a wake ran %q again", got)
	}
}

// Input waits for the guest's own clock and identity (WaitIdentity), a
// screen does not (WaitNone): a guest whose agent has not answered yet
// holds the one and not the other.
func TestInputWaitsForTheGuestIdentity(t *testing.T) {
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := desktoptest.NewFake()
	ctx := context.Background()
	if _, err := desktoptest.BakeFake(ctx, f, cat, "s"); err != nil {
		t.Fatal(err)
	}
	m := desktop.NewManager(ctx, desktop.Config{Driver: f, Store: desktoptest.NewMemStore(), Catalog: cat, Limits: desktop.DefaultLimits()})
	defer m.Close()
	release := f.HoldAgents()
	d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "s"})
	if err != nil {
		release()
		t.Fatal(err)
	}
	if _, _, err := m.Machine(ctx, d.ID, desktop.WaitNone); err != nil {
		release()
		t.Fatalf("WaitNone while the agent is held: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err = m.Machine(short, d.ID, desktop.WaitIdentity)
	cancel()
	if !errors.Is(err, desktop.ErrUnavailable) {
		release()
		t.Fatalf("WaitIdentity before the guest's clock is set: %v, want ErrUnavailable", err)
	}
	release()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := m.Machine(wctx, d.ID, desktop.WaitIdentity); err != nil {
		t.Fatalf("WaitIdentity once the agent answers: %v", err)
	}
}
