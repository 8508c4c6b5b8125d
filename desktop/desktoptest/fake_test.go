package desktoptest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// The fake is held to the suite like every driver; the checks that need a
// guest OS skip, saying so.
func TestConformanceOnFake(t *testing.T) {
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := desktoptest.NewFake()
	if _, err := desktoptest.BakeFake(context.Background(), f, cat, "golden"); err != nil {
		t.Fatal(err)
	}
	desktoptest.Run(t, desktoptest.Harness{
		NewDriver: func(*testing.T) desktop.Driver { return f }, // the same "host" after a restart
		Catalog:   cat,
		Snapshot:  "golden",
		NewStore:  func(*testing.T) desktop.Store { return desktoptest.NewMemStore() },
		Kill:      func(t *testing.T, m desktop.Machine) { m.(*desktoptest.FakeMachine).Crash("killed by signal KILL") },
		Gone: func(t *testing.T, rec []byte) bool {
			_, err := f.Attach(context.Background(), rec)
			return errors.Is(err, desktop.ErrNotFound)
		},
		Running: func(*testing.T) []string { return f.Running() },
	})
}
