package drivetest

import (
	"context"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// Desktop is a Manager on the fake driver with one running desktop, whose
// guest is an in-memory Guest and whose screen (Screens' default) changes
// with every input batch, as a guest drawing its pointer does.
type Desktop struct {
	Manager *desktop.Manager
	Driver  *desktoptest.Fake
	Guest   *Guest
	Screen  *Screen
	Screens *Screens
	ID      string
}

// NewManager is a Manager on the fake driver, without a pool, with one
// snapshot "snap" whose desktops run onCreate, and the Guest of its
// machines; everything ends with the test.
func NewManager(t testing.TB, onCreate ...string) (*desktop.Manager, *desktoptest.Fake, *Guest) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	drv := desktoptest.NewFake()
	guest := NewGuest(drv)
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desktoptest.BakeFake(ctx, drv, cat, "snap", onCreate...); err != nil {
		t.Fatal(err)
	}
	lim := desktop.DefaultLimits()
	lim.PoolSize = 0
	mgr := desktop.NewManager(ctx, desktop.Config{Driver: drv, Store: desktoptest.NewMemStore(), Catalog: cat, Limits: lim})
	t.Cleanup(mgr.Close)
	return mgr, drv, guest
}

// NewDesktop starts it; everything ends with the test.
func NewDesktop(t testing.TB) *Desktop {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr, drv, guest := NewManager(t)
	d, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: "snap"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait out the clone's clock and identity setting, so tests see only
	// the guest programs they cause.
	if _, _, err := mgr.Machine(ctx, d.ID, desktop.WaitSetUp); err != nil {
		t.Fatal(err)
	}
	screen := NewScreen(1280, 800)
	f := &Desktop{Manager: mgr, Driver: drv, Guest: guest, Screen: screen, Screens: &Screens{Default: screen}, ID: d.ID}
	screen.FollowInput(f.Machine(t))
	return f
}

// Machine is the desktop's fake machine, which records its input frames.
func (f *Desktop) Machine(t testing.TB) *desktoptest.FakeMachine {
	t.Helper()
	m, _, err := f.Manager.Machine(context.Background(), f.ID, desktop.WaitNone)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*desktoptest.FakeMachine)
}
