package drive

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"image"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// Window is a top-level window the guest's window manager manages, as
// EWMH lists it (_NET_CLIENT_LIST). X, Y, Width and Height are its client
// area (the application's own pixels, inside the window manager's border
// and title bar); Frame is the whole window as the screen shows it, the
// decorations included. Both are in the coordinate space it was asked in.
type Window struct {
	ID string // X window id, 0x and 8 hex digits
	// Title is the window's name (_NET_WM_NAME, else WM_NAME).
	Title string
	// Class and Instance are WM_CLASS's two parts ("XTerm", "xterm").
	Class    string
	Instance string
	// PID is _NET_WM_PID: 0 when the client does not set it.
	PID int
	// Workspace is the window manager's desktop number, -1 on all of them.
	Workspace int
	X         int
	Y         int
	Width     int
	Height    int
	Frame     Rect
	Focused   bool
}

// Rect is a rectangle by its top-left corner and its size.
type Rect struct{ X, Y, Width, Height int }

// Placement is a move or resize: the new top-left corner of the client
// area, its new size, or both. A nil field keeps what the window has.
type Placement struct {
	X, Y          *int
	Width, Height *int
}

// windowWait bounds how long an operation waits for the window manager
// to carry it out (openbox answers in tens of milliseconds under TCG);
// the helper looks every 20 ms.
const (
	windowWait = 3 * time.Second
	windowPoll = 20 * time.Millisecond
	// windowTimeout bounds the helper: a move that the window manager
	// carries out in two steps waits for each.
	windowTimeout = 2*windowWait + 5*time.Second
)

// windowsHelper is the guest side of the window API: a small X client in
// Perl (perl-base is in every Debian image) that reads every window's
// properties and geometry over one connection and carries out the
// operations through EWMH client messages, in one guest exec per call.
// It replaced a script that ran wmctrl once and xdotool once per window
// (4.5 to 7 s per list under TCG) and whose geometry was off by the frame
// (xdotool counts the client's offset in its frame twice).
//
//go:embed windows.pl
var windowsHelper string

// helperNoWindow is the helper's answer for a window that is not managed.
const helperNoWindow = 4

// windowHelper runs the helper with an operation and its arguments, and
// reads its answer: the windows it lists, or for close whether the window
// closed. A window that is not (or no longer) managed is ErrNotFound.
func (s *Service) windowHelper(ctx context.Context, id, op string, args ...string) ([]Window, string, error) {
	res, err := s.exec(ctx, id, ExecRequest{
		Path: "perl", Args: append([]string{"-e", windowsHelper, "--", seconds(windowTimeout), op}, args...),
		Timeout: windowTimeout, MaxOutput: desktop.DefaultMaxOutput, bare: true,
	})
	switch {
	case err != nil:
		return nil, "", err
	case res.Signal != 0:
		return nil, "", fmt.Errorf("%w: desktop %s: the window helper (%s) ended by signal %d after %s", desktop.ErrUnavailable, id, op, res.Signal, res.Duration.Round(time.Millisecond))
	case res.ExitCode == helperNoWindow:
		win := ""
		if len(args) > 0 {
			win = args[0]
		}
		return nil, "", fmt.Errorf("%w: desktop %s has no window %s: list them with GET /v1/desktops/%s/windows", desktop.ErrNotFound, id, win, id)
	case res.ExitCode == 127:
		return nil, "", fmt.Errorf("%w: desktop %s: its image has no perl, which the window API runs: use an image built on Debian", desktop.ErrConflict, id)
	case res.ExitCode != 0:
		return nil, "", fmt.Errorf("windows of %s (%s): exit %d: %s", id, op, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	out := string(res.Stdout)
	if op == "close" {
		return nil, strings.TrimSpace(out), nil
	}
	wins, err := parseWindows(out)
	return wins, "", err
}

// Windows lists the desktop's top-level windows in the window manager's
// order (oldest first), with geometry in the space of a declared display
// size (zero: native pixels).
func (s *Service) Windows(ctx context.Context, id string, display image.Point) ([]Window, error) {
	space, err := s.windowSpace(id, display)
	if err != nil {
		return nil, err
	}
	wins, _, err := s.windowHelper(ctx, id, "list")
	if err != nil {
		return nil, err
	}
	for i := range wins {
		wins[i] = inSpace(wins[i], space)
	}
	return wins, nil
}

// operable checks a window id a caller gave, for an operation on it:
// like input, it is refused while a person holds control.
func (s *Service) operable(id, win string) (string, error) {
	wid, err := WindowID(win)
	if err != nil {
		return "", err
	}
	d, err := s.mgr.Get(id)
	if err != nil {
		return "", err
	}
	if err := d.InputAllowed(); err != nil {
		return "", err
	}
	return wid, nil
}

// theWindow is the one window an operation answers with.
func theWindow(id, wid string, wins []Window, space input.Space) (Window, error) {
	i := slices.IndexFunc(wins, func(w Window) bool { return w.ID == wid })
	if i < 0 {
		return Window{}, fmt.Errorf("%w: window %s of %s closed meanwhile", desktop.ErrNotFound, wid, id)
	}
	return inSpace(wins[i], space), nil
}

// FocusWindow activates a window (raising it, and switching to its
// workspace) and returns it once the window manager says it is active.
func (s *Service) FocusWindow(ctx context.Context, id, win string, display image.Point) (Window, error) {
	wid, err := s.operable(id, win)
	if err != nil {
		return Window{}, err
	}
	space, err := s.windowSpace(id, display)
	if err != nil {
		return Window{}, err
	}
	wins, _, err := s.windowHelper(ctx, id, "focus", wid, windowPolls())
	if err != nil {
		return Window{}, err
	}
	return theWindow(id, wid, wins, space)
}

// CloseWindow asks a window to close, as its close button does
// (WM_DELETE_WINDOW through the window manager). closed is false when it
// is still open after windowWait: the application may be asking the user
// to confirm.
func (s *Service) CloseWindow(ctx context.Context, id, win string) (closed bool, err error) {
	wid, err := s.operable(id, win)
	if err != nil {
		return false, err
	}
	_, out, err := s.windowHelper(ctx, id, "close", wid, windowPolls())
	if err != nil {
		return false, err
	}
	if out != "closed" && out != "open" {
		return false, fmt.Errorf("close window %s of %s: %w: %.80q", wid, id, errWindowsOutput, out)
	}
	return out == "closed", nil
}

// PlaceWindow moves and resizes a window, in the space of a declared
// display size: its client area's top-left corner goes to x, y, and the
// client area takes the size. The window manager has the last word (a
// terminal snaps its size to whole character cells, a window keeps its
// minimum size): the answer is where the window is afterwards.
func (s *Service) PlaceWindow(ctx context.Context, id, win string, p Placement, display image.Point) (Window, error) {
	if p.X == nil && p.Y == nil && p.Width == nil && p.Height == nil {
		return Window{}, fieldError("x", "nothing to change: give x and y, width and height, or all four")
	}
	if (p.X == nil) != (p.Y == nil) {
		return Window{}, fieldError("y", "give x and y together")
	}
	if (p.Width == nil) != (p.Height == nil) {
		return Window{}, fieldError("height", "give width and height together")
	}
	space, err := s.windowSpace(id, display)
	if err != nil {
		return Window{}, err
	}
	target, err := nativePlacement(p, space)
	if err != nil {
		return Window{}, err
	}
	wid, err := s.operable(id, win)
	if err != nil {
		return Window{}, err
	}
	wins, _, err := s.windowHelper(ctx, id, "place", append(append([]string{wid}, target.args()...), windowPolls())...)
	if err != nil {
		return Window{}, err
	}
	return theWindow(id, wid, wins, space)
}

func windowPolls() string { return strconv.Itoa(int(windowWait / windowPoll)) }

// windowSpace is the coordinate space of a declared display size, nil for
// native pixels (which are reported as they are, off-screen parts too).
func (s *Service) windowSpace(id string, display image.Point) (input.Space, error) {
	if display == (image.Point{}) {
		return nil, nil
	}
	native, err := s.ScreenSize(id)
	if err != nil {
		return nil, err
	}
	return spaceOf(native, display), nil
}

// inSpace maps a window's native geometry into a space by its corners, so
// a window that fills the screen fills the space. Parts off the screen
// are clamped to its edges there.
func inSpace(w Window, space input.Space) Window {
	if space == nil {
		return w
	}
	w.X, w.Y, w.Width, w.Height = rectInSpace(w.X, w.Y, w.Width, w.Height, space)
	f := w.Frame
	w.Frame.X, w.Frame.Y, w.Frame.Width, w.Frame.Height = rectInSpace(f.X, f.Y, f.Width, f.Height, space)
	return w
}

func rectInSpace(x, y, width, height int, space input.Space) (int, int, int, int) {
	x1, y1 := space.FromNative(x, y)
	x2, y2 := space.FromNative(x+width-1, y+height-1)
	return x1, y1, x2 - x1 + 1, y2 - y1 + 1
}

// nativeTarget is a placement in native pixels; -1 keeps a value (as the
// helper takes it).
type nativeTarget struct{ x, y, w, h int }

func (t nativeTarget) args() []string {
	return []string{strconv.Itoa(t.x), strconv.Itoa(t.y), strconv.Itoa(t.w), strconv.Itoa(t.h)}
}

// maxWindowEdge bounds a window's size in native pixels: X's limit is
// 32767, and no screen here comes near it.
const maxWindowEdge = 16384

// nativePlacement checks a placement in its space and maps it to native
// pixels. The corner must lie on the screen (as an action's point must);
// a size is 1 to maxWindowEdge (or, in a declared display, up to its
// size).
func nativePlacement(p Placement, space input.Space) (nativeTarget, error) {
	t := nativeTarget{-1, -1, -1, -1}
	limitW, limitH := maxWindowEdge, maxWindowEdge
	if space != nil {
		limitW, limitH = space.Size()
	}
	if p.X != nil {
		x, y := *p.X, *p.Y
		if x < 0 || y < 0 || (space != nil && (x >= limitW || y >= limitH)) || x >= maxWindowEdge || y >= maxWindowEdge {
			return t, fieldError("x", "(%d, %d): the corner must lie on the screen, from (0, 0) to below (%d, %d)", x, y, limitW, limitH)
		}
		t.x, t.y = x, y
		if space != nil {
			t.x, t.y = space.ToNative(x, y)
		}
	}
	if p.Width != nil {
		w, h := *p.Width, *p.Height
		if w < 1 || h < 1 || w > limitW || h > limitH {
			return t, fieldError("width", "%dx%d: a size is 1x1 to %dx%d", w, h, limitW, limitH)
		}
		t.w, t.h = w, h
		if space != nil {
			sw, sh := space.Size()
			nw, nh := space.ToNative(sw-1, sh-1)
			t.w, t.h = scaleLength(w, sw, nw+1), scaleLength(h, sh, nh+1)
		}
	}
	return t, nil
}

// scaleLength maps a length in a space of size from to one of size to,
// rounding, and never to zero.
func scaleLength(v, from, to int) int {
	return max(1, int((int64(2*v)*int64(to)+int64(from))/(2*int64(from))))
}

// WindowID checks a window id as the list gives it ("0x01a00003") or as
// a number, and returns it in the list's form.
func WindowID(s string) (string, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 0, 32)
	if err != nil || n == 0 {
		return "", fieldError("window", "%q is not a window id: use an id from the window list, such as 0x01a00003", s)
	}
	return fmt.Sprintf("0x%08x", n), nil
}

// errWindowsOutput is a helper's output that does not parse.
var errWindowsOutput = errors.New("unexpected output from the window helper")

// windowFields is the number of fields of a window line: "window", id,
// workspace, pid, the client area's x, y, width and height, the frame's
// extents left, right, top and bottom, instance, class and title.
const windowFields = 15

// parseWindows reads windowsHelper's output: a line "active N" (decimal,
// 0 for none), then one tab-separated line per window, the title last (it
// may hold tabs; the helper turns line breaks into spaces). Lines it does
// not know are skipped.
func parseWindows(out string) ([]Window, error) {
	lines := strings.Split(out, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "active ") {
		return nil, fmt.Errorf("%w: %.80q", errWindowsOutput, out)
	}
	active, err := strconv.ParseUint(strings.TrimPrefix(lines[0], "active "), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: %.80q", errWindowsOutput, lines[0])
	}
	wins := []Window{}
	for _, line := range lines[1:] {
		f := strings.SplitN(line, "\t", windowFields)
		if len(f) != windowFields || f[0] != "window" {
			continue
		}
		w, ok := parseWindow(f[1:])
		if !ok {
			continue
		}
		id, _ := strconv.ParseUint(w.ID, 0, 32)
		w.Focused = active != 0 && id == active
		wins = append(wins, w)
	}
	return wins, nil
}

// parseWindow reads id, workspace, pid, the client area, the frame's
// extents, instance, class and title.
func parseWindow(f []string) (Window, bool) {
	id, err := WindowID(f[0])
	if err != nil || !strings.HasPrefix(f[0], "0x") {
		return Window{}, false
	}
	var n [10]int
	for i := range n {
		v, err := strconv.Atoi(f[1+i])
		if err != nil {
			return Window{}, false
		}
		n[i] = v
	}
	ws, pid, x, y, width, height := n[0], n[1], n[2], n[3], n[4], n[5]
	left, right, top, bottom := n[6], n[7], n[8], n[9]
	if width < 0 || height < 0 || min(left, right, top, bottom) < 0 || max(left, right, top, bottom) > maxWindowEdge {
		return Window{}, false
	}
	return Window{
		ID: id, Workspace: ws, PID: max(pid, 0), X: x, Y: y, Width: width, Height: height,
		Frame:    Rect{X: x - left, Y: y - top, Width: width + left + right, Height: height + top + bottom},
		Instance: f[11], Class: f[12], Title: f[13],
	}, true
}
