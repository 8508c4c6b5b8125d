package drivetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// Window is a window of the fake window manager, in native pixels.
type Window struct {
	ID                  uint32
	Title, Class        string
	PID                 int
	X, Y, Width, Height int
}

// windowManager answers the drive service's window helpers as wmctrl and
// xdotool under openbox would: a list oldest first, one active window,
// moves and resizes that land exactly, closes that take.
type windowManager struct {
	windows []Window
	active  uint32
}

// newWindowManager starts with the minimal image's one focused xterm.
func newWindowManager() windowManager {
	return windowManager{
		windows: []Window{{ID: 0x01c0000d, Title: "root@warmdesk: ~", Class: "XTerm", PID: 212, X: 41, Y: 61, Width: 644, Height: 388}},
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

func (wm *windowManager) run(script string, args []string) (desktoptest.GuestResult, error) {
	if strings.Contains(script, "wmctrl -l -p -x") {
		var b strings.Builder
		fmt.Fprintf(&b, "active %d\n", wm.active)
		for _, w := range wm.windows {
			fmt.Fprintf(&b, "window\t0x%08x\t0\t%d\t%d\t%d\t%d\t%d\t%s.%s\t%s\n", w.ID, w.PID, w.X, w.Y, w.Width, w.Height, strings.ToLower(w.Class), w.Class, w.Title)
		}
		return ok(b.String())
	}
	if len(args) < 2 {
		return failed(2, "wmctrl: missing arguments")
	}
	i := wm.find(args[0])
	if i < 0 {
		return failed(1, "wmctrl: no window "+args[0])
	}
	switch {
	case strings.Contains(script, "wmctrl -i -a"):
		wm.active = wm.windows[i].ID
		return ok("")
	case strings.Contains(script, "wmctrl -i -c"):
		if wm.active == wm.windows[i].ID {
			wm.active = 0
		}
		wm.windows = slices.Delete(wm.windows, i, i+1)
		return ok("closed\n")
	case strings.Contains(script, "wmctrl -i -r") && len(args) == 6:
		w := &wm.windows[i]
		for j, field := range []*int{&w.X, &w.Y, &w.Width, &w.Height} {
			if v, err := strconv.Atoi(args[2+j]); err == nil && v >= 0 {
				*field = v
			}
		}
		return ok(fmt.Sprintf("%d %d %d %d\n", w.X, w.Y, w.Width, w.Height))
	}
	return failed(2, "wmctrl: unknown helper")
}
