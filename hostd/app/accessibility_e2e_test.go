package app_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// findAX returns the first node, depth first, with a role and name.
func findAX(n *api.AXNode, role, name string) *api.AXNode {
	if n == nil {
		return nil
	}
	if n.Role == role && n.Name == name {
		return n
	}
	for i := range n.Children {
		if f := findAX(&n.Children[i], role, name); f != nil {
			return f
		}
	}
	return nil
}

// The accessibility tree of the browser image's Chromium: the start
// page's controls with their bounds, a click at the middle of a field's
// bounds landing in it, the limits, and a focused terminal that has no
// tree.
func TestAccessibilityEndToEnd(t *testing.T) {
	s := startStackOn(t, "browser")
	ctx := s.ctx(t)

	tree, err := s.c.Accessibility(ctx, s.id, client.AXQuery{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("focused: %d nodes, %d not showing, %d left out, application %q", tree.Nodes, tree.NotShowing, tree.LeftOut, tree.Application)
	if tree.Scope != "focused" || tree.Root == nil || tree.Root.Role != "frame" || !strings.Contains(tree.Root.Name, "warmdesk start page") {
		t.Fatalf("the focused window's tree: %+v", tree)
	}
	if findAX(tree.Root, "heading", "warmdesk browser desktop") == nil {
		t.Error("no heading of the start page in the tree")
	}
	field := findAX(tree.Root, "entry", "type here")
	if field == nil || len(field.Bounds) != 4 {
		t.Fatalf("the start page's field: %+v", field)
	}
	b := field.Bounds
	if b[0] < 0 || b[1] < 80 || b[0]+b[2] > 1280 || b[1]+b[3] > 800 || b[2] < 50 || b[3] < 10 {
		t.Errorf("the field's bounds %v are not on the page", b)
	}

	// An agent clicks the middle of the field's bounds and types.
	mid := input.Point{X: b[0] + b[2]/2, Y: b[1] + b[3]/2}
	s.actions(t, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindClick, At: &mid}, {Kind: input.KindType, Text: "from the tree"}}})
	var value string
	if !testenv.Poll(30*time.Second, 200*time.Millisecond, 2*time.Second, func() bool {
		tree, err := s.c.Accessibility(ctx, s.id, client.AXQuery{})
		if f := findAX(tree.Root, "entry", "type here"); err == nil && f != nil && f.Value != nil {
			value = *f.Value
		}
		return value == "from the tree"
	}) {
		t.Errorf("the field's value is %q after a click at its middle and typing", value)
	}

	// In a declared display, bounds are in its pixels.
	half, err := s.c.Accessibility(ctx, s.id, client.AXQuery{Display: client.Display{Width: 640, Height: 400}})
	if err != nil {
		t.Fatal(err)
	}
	if hf := findAX(half.Root, "entry", "type here"); hf == nil || abs(hf.Bounds[0]-b[0]/2) > 1 || abs(hf.Bounds[1]-b[1]/2) > 1 {
		t.Errorf("the field at 640x400: %+v, natively %v", hf, b)
	}

	// Over the node limit: cut, counted and said, never an error.
	small, err := s.c.Accessibility(ctx, s.id, client.AXQuery{Scope: "screen", MaxNodes: 5})
	if err != nil {
		t.Fatal(err)
	}
	if small.Nodes > 5 || small.LeftOut == 0 || !strings.Contains(small.Note, "max_nodes") || small.Root == nil || small.Root.Role != "desktop frame" {
		t.Errorf("screen with max_nodes 5: %d nodes, %d left out, note %q, root %+v", small.Nodes, small.LeftOut, small.Note, small.Root)
	}
	all, err := s.c.Accessibility(ctx, s.id, client.AXQuery{Scope: "screen", Hidden: true, MaxNodes: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if all.NotShowing != 0 || all.Nodes <= tree.Nodes {
		t.Errorf("with hidden nodes: %d nodes (%d not showing), against %d showing", all.Nodes, all.NotShowing, tree.Nodes)
	}

	var ce *client.Error
	if _, err := s.c.Accessibility(ctx, s.id, client.AXQuery{Scope: "window"}); !errors.As(err, &ce) || ce.Status != 400 || ce.Field != "scope" {
		t.Errorf("scope window: %v, want 400 on scope", err)
	}

	// The xterm focused: it exposes no tree, and the answer says so.
	wins, err := s.c.Windows(ctx, s.id, client.Display{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wins {
		if w.Class == "XTerm" {
			if _, err := s.c.FocusWindow(ctx, s.id, w.ID, client.Display{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	none, err := s.c.Accessibility(ctx, s.id, client.AXQuery{})
	if err != nil || none.Root != nil || !strings.Contains(none.Note, "no window is active") {
		t.Errorf("with the xterm focused: %+v %v", none, err)
	}
}
