package drivetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// Window is a window of the fake window manager, in native pixels: its
// client area, and the extents of the frame around it (left, right, top,
// bottom; zero for an undecorated window).
type Window struct {
	ID                  uint32
	Title, Class        string
	PID                 int
	X, Y, Width, Height int
	Frame               [4]int
}

// windowManager answers the drive service's window helper as it does
// under openbox: a list oldest first, one active window, moves and
// resizes that land exactly, closes that take.
type windowManager struct {
	windows []Window
	active  uint32
}

// newWindowManager starts with the minimal image's one focused xterm in
// openbox's frame.
func newWindowManager() windowManager {
	return windowManager{
		windows: []Window{{ID: 0x01c0000d, Title: "root@warmdesk: ~", Class: "XTerm", PID: 212, X: 41, Y: 61, Width: 644, Height: 388, Frame: [4]int{1, 1, 20, 5}}},
		active:  0x01c0000d,
	}
}

// SetWindows replaces the fake window manager's windows; the first is
// the active one.
func (g *Guest) SetWindows(ws ...Window) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wm.windows, g.wm.active = slices.Clone(ws), 0
	if len(ws) > 0 {
		g.wm.active = ws[0].ID
	}
}

func (wm *windowManager) find(arg string) int {
	id, err := strconv.ParseUint(arg, 0, 32)
	if err != nil {
		return -1
	}
	return slices.IndexFunc(wm.windows, func(w Window) bool { return uint64(w.ID) == id })
}

// answer prints the helper's listing of some windows.
func (wm *windowManager) answer(ws ...Window) (desktoptest.GuestResult, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "active %d\n", wm.active)
	for _, w := range ws {
		f := w.Frame
		fmt.Fprintf(&b, "window\t0x%08x\t0\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n",
			w.ID, w.PID, w.X, w.Y, w.Width, w.Height, f[0], f[1], f[2], f[3], strings.ToLower(w.Class), w.Class, w.Title)
	}
	return ok(b.String())
}

// run answers the helper's operation (its arguments after "--").
func (wm *windowManager) run(args []string) (desktoptest.GuestResult, error) {
	if len(args) == 0 {
		return failed(2, "usage")
	}
	op, args := args[0], args[1:]
	if op == "list" {
		return wm.answer(wm.windows...)
	}
	if len(args) < 2 {
		return failed(2, "usage: "+op+" WINDOW ... POLLS")
	}
	i := wm.find(args[0])
	if i < 0 {
		return desktoptest.GuestResult{ExitCode: 4, Stdout: []byte("no window\n")}, nil
	}
	switch {
	case op == "focus":
		wm.active = wm.windows[i].ID
		return wm.answer(wm.windows[i])
	case op == "close":
		if wm.active == wm.windows[i].ID {
			wm.active = 0
		}
		wm.windows = slices.Delete(wm.windows, i, i+1)
		return ok("closed\n")
	case op == "place" && len(args) == 6:
		w := &wm.windows[i]
		for j, field := range []*int{&w.X, &w.Y, &w.Width, &w.Height} {
			if v, err := strconv.Atoi(args[1+j]); err == nil && v >= 0 {
				*field = v
			}
		}
		return wm.answer(*w)
	}
	return failed(2, "unknown operation "+op)
}
