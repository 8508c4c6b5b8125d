package drive

import (
	"context"
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
// EWMH lists it (_NET_CLIENT_LIST). Its geometry is the client area (the
// application's own pixels, inside the window manager's frame), in the
// coordinate space it was asked in.
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
	Focused   bool
}

// Placement is a move or resize: the new top-left corner of the client
// area, its new size, or both. A nil field keeps what the window has.
type Placement struct {
	X, Y          *int
	Width, Height *int
}

// windowWait bounds how long an operation waits for the window manager
// to carry it out (openbox answers in tens of milliseconds under TCG);
// windowPoll is how often the guest looks (the helpers' "sleep 0.02").
const (
	windowWait    = 3 * time.Second
	windowPoll    = 20 * time.Millisecond
	windowTimeout = windowWait + 5*time.Second
)

// The guest's helpers. wmctrl speaks EWMH to the window manager (list,
// activate, close, move and resize); xdotool reads geometry (the client
// area translated to the root window) and the active window.
// $1 is a window id this service checked; the helpers wait, polling at
// windowPoll, up to $2 polls for the window manager to act.
const (
	windowsScript = `command -v wmctrl >/dev/null || { echo "wmctrl is not installed" >&2; exit 127; }
active=$(xdotool getactivewindow 2>/dev/null) || active=0
list=$(wmctrl -l -p -x) || { echo "wmctrl could not list windows: is a window manager running?" >&2; exit 3; }
echo "active $active"
printf '%s\n' "$list" | while read -r id ws pid class host title; do
  [ -n "$id" ] || continue
  X= Y= WIDTH= HEIGHT=
  eval "$(xdotool getwindowgeometry --shell "$id" 2>/dev/null)" || continue
  printf 'window\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$ws" "$pid" "$X" "$Y" "$WIDTH" "$HEIGHT" "$class" "$title"
done`
	windowGeometry = `geometry() { X= Y= WIDTH= HEIGHT=; eval "$(xdotool getwindowgeometry --shell "$1" 2>/dev/null)"; echo "$X $Y $WIDTH $HEIGHT"; }
`
	// windowPlace moves and resizes ($3..$6, -1 keeps a value), waits
	// until the geometry changes and prints it. openbox puts its frame's
	// corner, not the client area's, at the point asked (StaticGravity in
	// the request made no difference), so a move that lands off by the
	// frame's offset is made again by that offset. A placement the
	// window already has is answered at once; a first move that changes
	// nothing else (the frame was already there) waits out the bound.
	windowPlace = windowGeometry + `settle() {
  i=0; now=$3
  while [ "$now" = "$3" ] && [ $i -lt "$2" ]; do sleep 0.02; i=$((i+1)); now=$(geometry "$1"); done
  echo "$now"
}
before=$(geometry "$1")
read -r bx by bw bh <<EOF
$before
EOF
if { [ "$3" = -1 ] || [ "$3" = "$bx" ]; } && { [ "$4" = -1 ] || [ "$4" = "$by" ]; } &&
   { [ "$5" = -1 ] || [ "$5" = "$bw" ]; } && { [ "$6" = -1 ] || [ "$6" = "$bh" ]; }; then
  echo "$before"; exit 0
fi
wmctrl -i -r "$1" -e "0,$3,$4,$5,$6" || exit 3
now=$(settle "$1" "$2" "$before")
if [ "$3" != -1 ]; then
  set -- "$@" $now
  if [ "$7" != "$3" ] || [ "$8" != "$4" ]; then
    wmctrl -i -r "$1" -e "0,$(( $3 - ($7 - $3) )),$(( $4 - ($8 - $4) )),-1,-1" || exit 3
    now=$(settle "$1" "$2" "$now")
  fi
fi
echo "$now"`
	windowFocus = `wmctrl -i -a "$1" || exit 3
i=0
while [ "$(( $(xdotool getactivewindow 2>/dev/null || echo 0) ))" != "$(( $1 ))" ]; do
  [ $i -lt "$2" ] || { echo "the window manager did not focus $1" >&2; exit 5; }
  sleep 0.02; i=$((i+1))
done`
	windowClose = `wmctrl -i -c "$1" || exit 3
i=0
while wmctrl -l | grep -qi "^$1 "; do
  [ $i -lt "$2" ] || { echo open; exit 0; }
  sleep 0.02; i=$((i+1))
done
echo closed`
)

// Windows lists the desktop's top-level windows in the window manager's
// order (oldest first), with geometry in the space of a declared display
// size (zero: native pixels).
func (s *Service) Windows(ctx context.Context, id string, display image.Point) ([]Window, error) {
	wins, err := s.windows(ctx, id)
	if err != nil {
		return nil, err
	}
	space, err := s.windowSpace(id, display)
	if err != nil {
		return nil, err
	}
	for i := range wins {
		wins[i] = inSpace(wins[i], space)
	}
	return wins, nil
}

func (s *Service) windows(ctx context.Context, id string) ([]Window, error) {
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	res, err := s.shell(ctx, id, windowsScript, nil, windowTimeout)
	if err != nil {
		return nil, err
	}
	switch res.ExitCode {
	case 0:
		return parseWindows(string(res.Stdout))
	case 127:
		return nil, fmt.Errorf("%w: desktop %s: its image has no wmctrl, which the window API runs: build the image again and bake its snapshot again", desktop.ErrConflict, id)
	}
	return nil, fmt.Errorf("list the windows of %s: exit %d: %s", id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
}

// window finds one window by the id a caller gave, for an operation on
// it: like input, it is refused while a person holds control.
func (s *Service) window(ctx context.Context, id, win string) (Window, error) {
	wid, err := WindowID(win)
	if err != nil {
		return Window{}, err
	}
	d, err := s.mgr.Get(id)
	if err != nil {
		return Window{}, err
	}
	if err := d.InputAllowed(); err != nil {
		return Window{}, err
	}
	wins, err := s.windows(ctx, id)
	if err != nil {
		return Window{}, err
	}
	for _, w := range wins {
		if w.ID == wid {
			return w, nil
		}
	}
	return Window{}, fmt.Errorf("%w: desktop %s has no window %s: list them with GET /v1/desktops/%s/windows", desktop.ErrNotFound, id, wid, id)
}

// FocusWindow activates a window (raising it, and switching to its
// workspace) and returns it once the window manager says it is active.
func (s *Service) FocusWindow(ctx context.Context, id, win string, display image.Point) (Window, error) {
	w, err := s.window(ctx, id, win)
	if err != nil {
		return Window{}, err
	}
	if err := s.windowOp(ctx, id, windowFocus, w.ID); err != nil {
		return Window{}, err
	}
	return s.windowNow(ctx, id, w.ID, display)
}

// CloseWindow asks a window to close, as its close button does
// (WM_DELETE_WINDOW through the window manager). closed is false when it
// is still open after windowWait: the application may be asking the user
// to confirm.
func (s *Service) CloseWindow(ctx context.Context, id, win string) (closed bool, err error) {
	w, err := s.window(ctx, id, win)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	res, err := s.shell(ctx, id, windowClose, nil, windowTimeout, w.ID, windowPolls())
	if err != nil {
		return false, err
	}
	out := strings.TrimSpace(string(res.Stdout))
	if res.ExitCode != 0 || (out != "closed" && out != "open") {
		return false, fmt.Errorf("close window %s of %s: exit %d: %s", w.ID, id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return out == "closed", nil
}

// PlaceWindow moves and resizes a window, in the space of a declared
// display size. The window manager has the last word (a terminal snaps
// its size to whole character cells, a window keeps its minimum size): the
// answer is where the window is afterwards.
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
	w, err := s.window(ctx, id, win)
	if err != nil {
		return Window{}, err
	}
	if !target.changes(w) {
		return inSpace(w, space), nil
	}
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	res, err := s.shell(ctx, id, windowPlace, nil, windowTimeout, append([]string{w.ID, windowPolls()}, target.args()...)...)
	if err != nil {
		return Window{}, err
	}
	if res.ExitCode != 0 {
		return Window{}, fmt.Errorf("place window %s of %s: exit %d: %s", w.ID, id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	g, ok := parseGeometry(string(res.Stdout))
	if !ok {
		return Window{}, fmt.Errorf("place window %s of %s: unexpected output %.80q", w.ID, id, res.Stdout)
	}
	w.X, w.Y, w.Width, w.Height = g[0], g[1], g[2], g[3]
	return inSpace(w, space), nil
}

// windowOp runs an operation helper that answers only by its exit status.
func (s *Service) windowOp(ctx context.Context, id, script, win string) error {
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	res, err := s.shell(ctx, id, script, nil, windowTimeout, win, windowPolls())
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("window %s of %s: exit %d: %s", win, id, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// windowNow is a window as it is now, in a space.
func (s *Service) windowNow(ctx context.Context, id, wid string, display image.Point) (Window, error) {
	wins, err := s.windows(ctx, id)
	if err != nil {
		return Window{}, err
	}
	i := slices.IndexFunc(wins, func(w Window) bool { return w.ID == wid })
	if i < 0 {
		return Window{}, fmt.Errorf("%w: window %s of %s closed meanwhile", desktop.ErrNotFound, wid, id)
	}
	w := wins[i]
	space, err := s.windowSpace(id, display)
	if err != nil {
		return Window{}, err
	}
	return inSpace(w, space), nil
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
	x1, y1 := space.FromNative(w.X, w.Y)
	x2, y2 := space.FromNative(w.X+w.Width-1, w.Y+w.Height-1)
	w.X, w.Y, w.Width, w.Height = x1, y1, x2-x1+1, y2-y1+1
	return w
}

// nativeTarget is a placement in native pixels; -1 keeps a value (as
// wmctrl's -e takes it).
type nativeTarget struct{ x, y, w, h int }

func (t nativeTarget) args() []string {
	return []string{strconv.Itoa(t.x), strconv.Itoa(t.y), strconv.Itoa(t.w), strconv.Itoa(t.h)}
}

func (t nativeTarget) changes(w Window) bool {
	return (t.x >= 0 && (t.x != w.X || t.y != w.Y)) || (t.w >= 0 && (t.w != w.Width || t.h != w.Height))
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
var errWindowsOutput = errors.New("unexpected output from the window list helper")

// parseWindows reads windowsScript's output: a line "active N" (decimal,
// 0 for none), then one tab-separated line per window, the title last (it
// may hold tabs). Lines it does not know are skipped: a title with a
// newline in it continues on its own line, which is dropped.
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
		f := strings.SplitN(line, "\t", 10)
		if len(f) != 10 || f[0] != "window" {
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

// parseWindow reads id, workspace, pid, x, y, width, height, class and
// title.
func parseWindow(f []string) (Window, bool) {
	id, err := WindowID(f[0])
	if err != nil || !strings.HasPrefix(f[0], "0x") {
		return Window{}, false
	}
	var n [6]int
	for i := range n {
		v, err := strconv.Atoi(f[1+i])
		if err != nil {
			return Window{}, false
		}
		n[i] = v
	}
	if n[4] < 0 || n[5] < 0 {
		return Window{}, false
	}
	// wmctrl -x prints WM_CLASS as instance.class; an instance may hold
	// dots, a class does not.
	instance, class := "", f[7]
	if i := strings.LastIndexByte(f[7], '.'); i >= 0 {
		instance, class = f[7][:i], f[7][i+1:]
	}
	if class == "N/A" {
		instance, class = "", ""
	}
	return Window{
		ID: id, Workspace: n[0], PID: max(n[1], 0), X: n[2], Y: n[3], Width: n[4], Height: n[5],
		Instance: instance, Class: class, Title: f[8],
	}, true
}

// parseGeometry reads "X Y WIDTH HEIGHT".
func parseGeometry(out string) ([4]int, bool) {
	var g [4]int
	f := strings.Fields(out)
	if len(f) != 4 {
		return g, false
	}
	for i := range g {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			return g, false
		}
		g[i] = v
	}
	return g, true
}
