package app_test

import (
	"errors"
	"image"
	"image/color"
	"slices"
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
// display, and its errors; each rectangle it reports is where the
// screenshot shows the window. Then, on the same desktop, an exec whose
// background job outlives its timeout.
func TestWindowsEndToEnd(t *testing.T) {
	s := startActionStack(t)
	ctx := s.ctx(t)

	var wins []api.Window
	var err error
	var took []time.Duration
	for range 5 {
		start := time.Now()
		if wins, err = s.c.Windows(ctx, s.id, client.Display{}); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("5 window lists: p50 %s, max %s", took[2].Round(time.Millisecond), took[4].Round(time.Millisecond))
	if len(wins) != 1 {
		t.Fatalf("windows %+v, want the one xterm", wins)
	}
	term := wins[0]
	t.Logf("xterm: %+v", term)
	if term.Class != "XTerm" || term.Instance != "xterm" || term.PID <= 0 || term.Title == "" || !term.Focused ||
		term.X < 0 || term.Y < 0 || term.Width < 100 || term.Height < 100 || term.X+term.Width > 1280 || term.Y+term.Height > 800 {
		t.Errorf("the xterm is listed as %+v", term)
	}
	// openbox's frame: a border around, a title bar above, a handle below.
	if f := term.Frame; f.X >= term.X || f.Y >= term.Y-10 || f.X+f.Width <= term.X+term.Width || f.Y+f.Height <= term.Y+term.Height {
		t.Errorf("the xterm's frame %+v does not hold its client area and a title bar", f)
	}
	inPicture(t, s.screen(t), term, "listed")
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
	if moved.X != 200 || moved.Y != 150 || moved.Width != term.Width || moved.Height != term.Height ||
		moved.Frame.X-moved.X != term.Frame.X-term.X || moved.Frame.Y-moved.Y != term.Frame.Y-term.Y {
		t.Errorf("moved to 200,150: %+v", moved)
	}
	inPicture(t, s.screen(t), moved, "moved to 200,150")
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
	inPicture(t, s.screen(t), resized, "resized to 500x300")

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

	// A timed-out exec ends what it started: a job sent to the background
	// that holds the output kept the agent from reporting the end (a 504
	// after the timeout and 3 s, the loop still running).
	start := time.Now()
	res, err := s.c.Exec(ctx, s.id, api.ExecRequest{Shell: "(while :; do :; done) & echo $! > /tmp/loop.pid; echo hi", Timeout: api.Duration(2 * time.Second)})
	answered := time.Since(start)
	t.Logf("exec of a background loop with a 2s timeout answered after %s", answered.Round(time.Millisecond))
	if err != nil || !res.TimedOut || res.Stdout != "hi\n" {
		t.Errorf("exec of a background loop with a 2s timeout: %+v %v after %s, want timed_out with its output, within the agent's 3 s margin", res, err, answered)
	}
	if res := s.shell(t, "kill -0 $(cat /tmp/loop.pid) 2>/dev/null && echo running || echo gone"); res.Stdout != "gone\n" {
		t.Errorf("the background loop is %s after its exec timed out", res.Stdout)
	}
}

// inPicture checks a window's rectangles against a screenshot: the
// client area is the xterm's white from its first row and column to its
// last, the frame's edges are its own and just outside them the root
// window's background shows (nothing else is near on the minimal image).
func inPicture(t *testing.T, img *image.RGBA, w api.Window, when string) {
	t.Helper()
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	px := func(x, y int) color.RGBA { return img.RGBAAt(x, y) }
	x0, y0, x1, y1 := w.X, w.Y, w.X+w.Width-1, w.Y+w.Height-1
	midX, midY := (x0+x1)/2, (y0+y1)/2
	for _, p := range []image.Point{{x0, y0}, {x1, y0}, {x0, y1}, {x1, y1}} {
		if c := px(p.X, p.Y); c != white {
			t.Errorf("%s: the client area's corner %v is %v, not the xterm's white (%+v)", when, p, c, w)
		}
	}
	for _, p := range []image.Point{{x0 - 1, midY}, {x1 + 1, midY}, {midX, y0 - 1}, {midX, y1 + 1}} {
		if c := px(p.X, p.Y); c == white {
			t.Errorf("%s: %v, just outside the client area, is the xterm's white (%+v)", when, p, c)
		}
	}
	f := w.Frame
	fx0, fy0, fx1, fy1 := f.X, f.Y, f.X+f.Width-1, f.Y+f.Height-1
	for _, p := range []image.Point{{fx0, fy0}, {fx1, fy0}, {fx0, fy1}, {fx1, fy1}} {
		if p.In(img.Rect) && near(px(p.X, p.Y), background) {
			t.Errorf("%s: the frame's corner %v shows the background (%+v)", when, p, w)
		}
	}
	for _, p := range []image.Point{{fx0 - 1, midY}, {fx1 + 1, midY}, {midX, fy0 - 1}, {midX, fy1 + 1}} {
		if p.In(img.Rect) && !near(px(p.X, p.Y), background) {
			t.Errorf("%s: %v, just outside the frame, is %v, not the background (%+v)", when, p, px(p.X, p.Y), w)
		}
	}
}

func abs(v int) int { return max(v, -v) }
