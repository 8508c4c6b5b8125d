package drive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// AXOptions bound a walk.
type AXOptions struct {
	// Scope is AXFocused (the active window, the default) or AXScreen.
	Scope    string
	MaxDepth int
	MaxNodes int
	// Hidden includes nodes that are not showing on the screen.
	Hidden bool
	// Display is the declared coordinate space of the bounds; zero is
	// native pixels.
	Display image.Point
}

// Scopes, and the walk's limits.
const (
	AXFocused = "focused"
	AXScreen  = "screen"

	DefaultAXDepth = 40
	MaxAXDepth     = 200
	DefaultAXNodes = 500
	MaxAXNodes     = 5000
)

// axScript is where the browser flavor keeps the walker (images/guest).
const axScript = "/usr/local/lib/warmdesk/a11y-tree"

// axAfterKeys bounds how long a walk waits, from the last keys sent to
// the desktop, for its guest to have taken them (Service.afterKeys).
const axAfterKeys = 2 * time.Second

// axTimeout bounds a walk: python3 and the GObject bindings start in about
// a second under TCG, and every node is a few D-Bus calls.
const axTimeout = 60 * time.Second

// Check fills in defaults and refuses values out of range, naming the
// field.
func (o *AXOptions) Check() error {
	switch o.Scope {
	case "":
		o.Scope = AXFocused
	case AXFocused, AXScreen:
	default:
		return fieldError("scope", "%q: use %s (the active window) or %s (every application)", o.Scope, AXFocused, AXScreen)
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = DefaultAXDepth
	}
	if o.MaxDepth < 1 || o.MaxDepth > MaxAXDepth {
		return fieldError("max_depth", "%d: use 1 to %d", o.MaxDepth, MaxAXDepth)
	}
	if o.MaxNodes == 0 {
		o.MaxNodes = DefaultAXNodes
	}
	if o.MaxNodes < 1 || o.MaxNodes > MaxAXNodes {
		return fieldError("max_nodes", "%d: use 1 to %d", o.MaxNodes, MaxAXNodes)
	}
	return nil
}

// Accessibility walks the desktop's accessibility tree. Images without the
// accessibility bus (the minimal flavor) answer ErrConflict saying so.
func (s *Service) Accessibility(ctx context.Context, id string, o AXOptions) (api.AXTree, error) {
	if err := o.Check(); err != nil {
		return api.AXTree{}, err
	}
	space, err := s.windowSpace(id, o.Display)
	if err != nil {
		return api.AXTree{}, err
	}
	if err := s.afterKeys(ctx, id, axAfterKeys); err != nil {
		return api.AXTree{}, err
	}
	hidden := "0"
	if o.Hidden {
		hidden = "1"
	}
	res, err := s.exec(ctx, id, ExecRequest{
		Path: "/bin/sh", Args: []string{"-c", `export DISPLAY=${DISPLAY:-:0}
[ -x "$0" ] || { echo "no accessibility walker" >&2; exit 127; }
exec python3 -W ignore "$0" "$@"`, axScript, o.Scope, strconv.Itoa(o.MaxDepth), strconv.Itoa(o.MaxNodes), hidden},
		Timeout: axTimeout, MaxOutput: desktop.DefaultMaxOutput,
	})
	switch {
	case err != nil:
		return api.AXTree{}, err
	case res.TimedOut:
		return api.AXTree{}, fmt.Errorf("%w: desktop %s: the accessibility walk took over %s: ask for less (max_nodes, scope %s)", desktop.ErrUnavailable, id, axTimeout, AXFocused)
	case res.ExitCode == 127:
		return api.AXTree{}, fmt.Errorf("%w: desktop %s: its image has no accessibility bus: the browser flavor has one (images built since the accessibility API)", desktop.ErrConflict, id)
	case res.ExitCode != 0:
		return api.AXTree{}, fmt.Errorf("accessibility tree of %s: exit %d: %s", id, res.ExitCode, lastLine(res.Stderr))
	case res.StdoutTruncated:
		return api.AXTree{}, fmt.Errorf("accessibility tree of %s: over %d bytes: ask for fewer nodes (max_nodes)", id, desktop.DefaultMaxOutput)
	}
	tree, err := parseAXTree(res.Stdout)
	if err != nil {
		return api.AXTree{}, fmt.Errorf("accessibility tree of %s: %w", id, err)
	}
	if tree.LeftOut > 0 {
		tree.Note = fmt.Sprintf("%d children were left out past max_depth %d or max_nodes %d (nodes that have them say how many): raise those, or ask for scope %s", tree.LeftOut, o.MaxDepth, o.MaxNodes, AXFocused)
	}
	if space != nil && tree.Root != nil {
		boundsInSpace(tree.Root, space)
	}
	return tree, nil
}

// afterKeys waits, for at most bound from the last keys sent to the
// desktop, for its guest's CPUs to go idle: the sign (device.sealKeys)
// that its applications are done with the keys. A walk calls into the
// focused application, and Chromium, still handling typed keys when one
// began, dropped the rest of them: a field typed "from the tree" into and
// walked at once read back "f" or "fr" in about one run in four beside a
// CPU hog, for minutes after; with the walk 1.5 s after the keys, 8 of 8
// read the whole text (docs/API.md, "Accessibility after typing").
func (s *Service) afterKeys(ctx context.Context, id string, bound time.Duration) error {
	s.mu.Lock()
	d := s.desks[id]
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	last := d.keysAt.Load()
	if last == 0 {
		return nil
	}
	left := time.Until(time.Unix(0, last).Add(bound))
	if left <= 0 {
		return nil
	}
	start := time.Now()
	idle, err := s.cpuMeter(ctx, id).waitIdle(ctx, left)
	s.log.Debug("accessibility walk after keys", "desktop", id, "idle", idle, "waited", time.Since(start))
	return err
}

// lastLine is the last line of a program's error output: a Python
// traceback ends with the exception.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// parseAXTree reads the walker's JSON, strictly.
func parseAXTree(out []byte) (api.AXTree, error) {
	var t api.AXTree
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return api.AXTree{}, fmt.Errorf("unexpected output from the walker: %w", err)
	}
	if t.Scope != AXFocused && t.Scope != AXScreen {
		return api.AXTree{}, fmt.Errorf("unexpected output from the walker: scope %q", t.Scope)
	}
	if t.Root != nil {
		if err := checkAXNode(t.Root, 0); err != nil {
			return api.AXTree{}, err
		}
	}
	return t, nil
}

func checkAXNode(n *api.AXNode, depth int) error {
	if depth > MaxAXDepth {
		return fmt.Errorf("unexpected output from the walker: deeper than %d", MaxAXDepth)
	}
	if n.Bounds != nil && len(n.Bounds) != 4 {
		return fmt.Errorf("unexpected output from the walker: bounds %v", n.Bounds)
	}
	if n.States == nil {
		n.States = []string{}
	}
	for i := range n.Children {
		if err := checkAXNode(&n.Children[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// boundsInSpace maps every node's bounds into a space by their corners.
func boundsInSpace(n *api.AXNode, space input.Space) {
	if n.Bounds != nil {
		w := inSpace(Window{X: n.Bounds[0], Y: n.Bounds[1], Width: n.Bounds[2], Height: n.Bounds[3]}, space)
		n.Bounds = []int{w.X, w.Y, w.Width, w.Height}
	}
	for i := range n.Children {
		boundsInSpace(&n.Children[i], space)
	}
}
