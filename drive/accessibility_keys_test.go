package drive_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// walkedTree is a walker's answer with nothing in the focused window.
const walkedTree = `{"scope":"focused","root":null,"nodes":0,"left_out":0,"note":"no window is active"}`

// An accessibility walk right after typing waits for the guest to take
// the keys: while its CPUs stay busy, until 2 s (the walk's bound) after
// the last key; once they are idle, no longer.
func TestAccessibilityWalkWaitsForTypedKeys(t *testing.T) {
	for _, busy := range []bool{true, false} {
		h := newHarness(t, drive.Config{})
		var mu sync.Mutex
		var walkAt time.Time
		h.guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
			mu.Lock()
			walkAt = time.Now()
			mu.Unlock()
			return desktoptest.GuestResult{Stdout: []byte(walkedTree)}, nil
		}
		h.machine().SetBusy(busy)
		typed := time.Now() // before the last key: the bound counts from it
		if _, err := h.run(input.Batch{{Kind: input.KindType, Text: "ab"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Accessibility(context.Background(), h.id, drive.AXOptions{}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		after := walkAt.Sub(typed)
		mu.Unlock()
		// The wait ends at the last whole idle window (0.1 s) before it.
		if busy && after < 1800*time.Millisecond {
			t.Errorf("the walk began %s after the keys to a busy guest, before its bound", after)
		}
		if !busy && after >= 2*time.Second {
			t.Errorf("the walk began %s after the keys to an idle guest: it waited out the bound", after)
		}
	}
}
