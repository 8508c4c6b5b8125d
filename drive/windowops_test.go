package drive_test

import (
	"context"
	"errors"
	"image"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
)

// Every window call is one program in the guest (an agent lists windows
// at every step: a focus was three guest execs, a move two, and the list
// itself a process per window), and answers with the window's client area
// and frame.
func TestEachWindowCallIsOneGuestExec(t *testing.T) {
	h := newHarness(t, drive.Config{})
	h.guest.SetWindows(
		drivetest.Window{ID: 0x01c0000d, Title: "one", Class: "XTerm", PID: 212, X: 41, Y: 60, Width: 904, Height: 544, Frame: [4]int{1, 1, 20, 5}},
		drivetest.Window{ID: 0x01e0000d, Title: "two", Class: "XTerm", PID: 213, X: 300, Y: 300, Width: 400, Height: 200, Frame: [4]int{1, 1, 20, 5}},
	)
	ctx := context.Background()
	execs := func(name string, call func() error) {
		t.Helper()
		before := 0
		for _, c := range h.guest.Calls() {
			if c == "guest-exec" {
				before++
			}
		}
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := -before
		for _, c := range h.guest.Calls() {
			if c == "guest-exec" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s ran %d guest programs, want 1", name, n)
		}
	}
	execs("list", func() error {
		wins, err := h.svc.Windows(ctx, h.id, image.Point{})
		if err == nil && (len(wins) != 2 || wins[0].Frame != (drive.Rect{X: 40, Y: 40, Width: 906, Height: 569})) {
			t.Errorf("list %+v", wins)
		}
		return err
	})
	execs("focus", func() error {
		w, err := h.svc.FocusWindow(ctx, h.id, "0x1e0000d", image.Point{})
		if err == nil && (!w.Focused || w.ID != "0x01e0000d") {
			t.Errorf("focused %+v", w)
		}
		return err
	})
	x, y := 200, 150
	execs("move", func() error {
		w, err := h.svc.PlaceWindow(ctx, h.id, "0x01c0000d", drive.Placement{X: &x, Y: &y}, image.Point{})
		if err == nil && (w.X != 200 || w.Y != 150 || w.Frame.X != 199 || w.Frame.Y != 130) {
			t.Errorf("moved %+v", w)
		}
		return err
	})
	execs("close", func() error {
		closed, err := h.svc.CloseWindow(ctx, h.id, "0x01e0000d")
		if err == nil && !closed {
			t.Error("not closed")
		}
		return err
	})
	// A window that is not there is found out by the same one program.
	execs("focus a closed window", func() error {
		if _, err := h.svc.FocusWindow(ctx, h.id, "0x01e0000d", image.Point{}); !errors.Is(err, desktop.ErrNotFound) {
			t.Errorf("focus a closed window: %v, want not found", err)
		}
		return nil
	})
}
