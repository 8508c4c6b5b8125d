package desktop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// moveStore is a memory store that says it can hand records over, and
// counts the marks it was asked for.
type moveStore struct {
	*desktoptest.MemStore
	begun int
}

func (s *moveStore) BeginMove(desktop.Desktop, string) error        { s.begun++; return nil }
func (s *moveStore) EndMove(desktop.Desktop) (bool, error)          { return false, nil }
func (s *moveStore) TakeMoved(d desktop.Desktop, from string) error { return s.PutDesktop(d) }

// What cannot move is refused before anything happens, saying why: a
// host outside a fleet, a driver that cannot move machines, a bad id, a
// desktop already here, one that is not running.
func TestMovesRefuseWhatCannotMove(t *testing.T) {
	ctx := context.Background()
	f, cat := fakeSetup(t)
	single := desktop.NewManager(ctx, desktop.Config{Driver: f, Store: desktoptest.NewMemStore(), Catalog: cat})
	d := desktop.Desktop{ID: "d-0123456789abcdef", Snapshot: "golden", State: desktop.StateRunning, Resources: desktop.Resources{MemoryMiB: 1024}}
	if err := desktop.NewMoves(single).CanTake(d); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("a move into a host outside a fleet: %v, want ErrConflict", err)
	}

	store := &moveStore{MemStore: desktoptest.NewMemStore()}
	m := desktop.NewManager(ctx, desktop.Config{Driver: f, Store: store, Catalog: cat})
	mv := desktop.NewMoves(m)
	for _, id := range []string{"", "d-../../etc", "x-0123456789abcdef", "d-0123456789abcdeg"} {
		bad := d
		bad.ID = id
		if err := mv.CanTake(bad); !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("a move in of id %q: %v, want ErrInvalid", id, err)
		}
	}
	noMemory := d
	noMemory.Resources.MemoryMiB = 0
	if err := mv.CanTake(noMemory); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("a move in whose record has no memory: %v, want ErrInvalid", err)
	}
	if err := mv.CanTake(d); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("a move into a driver that cannot take one: %v, want ErrConflict", err)
	}

	here, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "golden"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mv.CanTake(here); !errors.Is(err, desktop.ErrConflict) || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("a move in of a desktop already here: %v, want ErrConflict saying so", err)
	}
	send := func(context.Context, desktop.LiveSender, desktop.Desktop, func(context.Context) error) error {
		t.Fatal("a move that should be refused was sent")
		return nil
	}
	if _, err := mv.Send(ctx, here.ID, "h2", send); !errors.Is(err, desktop.ErrConflict) {
		t.Errorf("a move out on a driver that cannot send one: %v, want ErrConflict", err)
	}
	if _, err := m.Pause(ctx, here.ID); err != nil {
		t.Fatal(err)
	}
	var te *desktop.TransitionError
	if _, err := mv.Send(ctx, here.ID, "h2", send); !errors.As(err, &te) {
		t.Errorf("a move of a paused desktop: %v, want a TransitionError", err)
	}
	if _, err := mv.Send(ctx, "d-ffffffffffffffff", "h2", send); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("a move of a desktop not here: %v, want ErrNotFound", err)
	}
	if store.begun != 0 {
		t.Errorf("%d records were marked as moving by refused moves", store.begun)
	}
	if err := mv.Hold(ctx, here.ID); err != nil {
		t.Errorf("Hold on a desktop that is not moving: %v", err)
	}
	if mv.MovedAway(here.ID) {
		t.Error("a desktop that never moved is said to have moved away")
	}
}
