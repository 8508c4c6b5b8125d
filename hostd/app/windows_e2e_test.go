package app_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// The window API on a real guest (minimal: openbox and one xterm): list,
// move, resize, focus and close, in native pixels and in a declared
// display, and its errors.
func TestWindowsEndToEnd(t *testing.T) {
	s := startActionStack(t)
	ctx := s.ctx(t)

	wins, err := s.c.Windows(ctx, s.id, client.Display{})
	if err != nil {
		t.Fatal(err)
	}
	if len(wins) != 1 {
		t.Fatalf("windows %+v, want the one xterm", wins)
	}
	term := wins[0]
	t.Logf("xterm: %+v", term)
	if term.Class != "XTerm" || term.Instance != "xterm" || term.PID <= 0 || term.Title == "" || !term.Focused ||
		term.X < 0 || term.Y < 0 || term.Width < 100 || term.Height < 100 || term.X+term.Width > 1280 || term.Y+term.Height > 800 {
		t.Errorf("the xterm is listed as %+v", term)
	}
	if res := s.shell(t, "cat /proc/"+strconv.Itoa(term.PID)+"/comm"); strings.TrimSpace(res.Stdout) != "xterm" {
		t.Errorf("pid %d is %q in the guest, not xterm", term.PID, res.Stdout)
	}

	half := client.Display{Width: 640, Height: 400}
	scaled, err := s.c.Windows(ctx, s.id, half)
	if err != nil || len(scaled) != 1 {
		t.Fatalf("windows at 640x400: %+v %v", scaled, err)
	}
	if sw := scaled[0]; abs(sw.X-term.X/2) > 1 || abs(sw.Y-term.Y/2) > 1 || abs(sw.Width-term.Width/2) > 1 || abs(sw.Height-term.Height/2) > 1 {
		t.Errorf("at 640x400 the xterm is %+v; natively %+v", sw, term)
	}

	moved, err := s.c.MoveWindow(ctx, s.id, term.ID, 200, 150, client.Display{})
	if err != nil {
		t.Fatal(err)
	}
	if moved.X != 200 || moved.Y != 150 || moved.Width != term.Width || moved.Height != term.Height {
		t.Errorf("moved to 200,150: %+v", moved)
	}
	// Where it already is: answered as it is, nothing moved.
	if again, err := s.c.MoveWindow(ctx, s.id, term.ID, 200, 150, client.Display{}); err != nil || again != moved {
		t.Errorf("moved again to 200,150: %+v, %v; want %+v", again, err, moved)
	}
	// In a declared display: 150,100 of 640x400 is 300,200 natively.
	if moved, err = s.c.MoveWindow(ctx, s.id, term.ID, 150, 100, half); err != nil {
		t.Fatal(err)
	}
	if moved.X != 150 || moved.Y != 100 {
		t.Errorf("moved to 150,100 of 640x400: %+v", moved)
	}
	resized, err := s.c.ResizeWindow(ctx, s.id, term.ID, 500, 300, client.Display{})
	if err != nil {
		t.Fatal(err)
	}
	// xterm keeps whole character cells (6x13 here, plus its border).
	if resized.Width > 500 || resized.Width < 480 || resized.Height > 300 || resized.Height < 280 || resized.X != 300 || resized.Y != 200 {
		t.Errorf("resized to 500x300: %+v", resized)
	}
	now, err := s.c.Windows(ctx, s.id, client.Display{})
	if err != nil || len(now) != 1 || now[0].X != resized.X || now[0].Width != resized.Width {
		t.Errorf("the list after the resize: %+v %v, want %+v", now, err, resized)
	}

	// A second window: focus moves between them, and closing one leaves
	// the other.
	s.shell(t, "DISPLAY=:0 setsid xterm -title second </dev/null >/dev/null 2>&1 &")
	var second api.Window
	if !testenv.Poll(30*time.Second, 100*time.Millisecond, time.Second, func() bool {
		wins, err := s.c.Windows(ctx, s.id, client.Display{})
		for _, w := range wins {
			if err == nil && w.Title == "second" {
				second = w
				return true
			}
		}
		return false
	}) {
		t.Fatal("the second xterm never showed in the list")
	}
	focused, err := s.c.FocusWindow(ctx, s.id, term.ID, client.Display{})
	if err != nil || !focused.Focused || focused.ID != term.ID {
		t.Fatalf("focus the first xterm: %+v %v", focused, err)
	}
	if focused, err = s.c.FocusWindow(ctx, s.id, second.ID, client.Display{}); err != nil || !focused.Focused {
		t.Fatalf("focus the second xterm: %+v %v", focused, err)
	}
	closed, err := s.c.CloseWindow(ctx, s.id, second.ID)
	if err != nil || !closed {
		t.Fatalf("close the second xterm: %v %v", closed, err)
	}
	if wins, err := s.c.Windows(ctx, s.id, client.Display{}); err != nil || len(wins) != 1 || wins[0].ID != term.ID {
		t.Errorf("after closing the second: %+v %v", wins, err)
	}

	var ce *client.Error
	if _, err := s.c.FocusWindow(ctx, s.id, second.ID, client.Display{}); !errors.As(err, &ce) || ce.Status != 404 {
		t.Errorf("focus a closed window: %v, want 404", err)
	}
	if _, err := s.c.CloseWindow(ctx, s.id, "xterm"); !errors.As(err, &ce) || ce.Status != 400 || ce.Field != "window" {
		t.Errorf("close a window named by its class: %v, want 400 on window", err)
	}
	if _, err := s.c.MoveWindow(ctx, s.id, term.ID, -5, 10, client.Display{}); !errors.As(err, &ce) || ce.Status != 400 || ce.Field != "x" {
		t.Errorf("move to a negative corner: %v, want 400 on x", err)
	}
	if _, err := s.c.ResizeWindow(ctx, s.id, term.ID, 700, 100, half); !errors.As(err, &ce) || ce.Status != 400 || ce.Field != "width" {
		t.Errorf("resize wider than the declared display: %v, want 400 on width", err)
	}
	if err := s.c.Do(ctx, "POST", "/v1/desktops/"+s.id+"/windows/"+term.ID+"/maximize", nil, nil); !errors.As(err, &ce) || ce.Status != 404 {
		t.Errorf("an unknown operation: %v, want 404", err)
	}
	// The minimal image has no accessibility bus, and says so.
	if _, err := s.c.Accessibility(ctx, s.id, client.AXQuery{}); !errors.As(err, &ce) || ce.Status != 409 || !strings.Contains(ce.Message, "accessibility bus") {
		t.Errorf("the accessibility tree of a minimal desktop: %v, want 409", err)
	}
}

func abs(v int) int { return max(v, -v) }
