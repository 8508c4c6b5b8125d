package drive

import (
	"errors"
	"testing"

	"github.com/warmdesk/warmdesk/screenshot"
)

// walked is the walker's output for a Chromium window with a button, cut
// at max_nodes.
const walked = `{"scope":"focused","application":"Chromium","root":{"role":"frame","name":"A page - Chromium","states":["active","showing","visible"],"bounds":[0,0,1280,800],"children":[{"role":"push button","name":"Press me","states":["focusable","showing"],"bounds":[100,200,80,30]},{"role":"entry","name":"","states":["editable","focused"],"bounds":[100,300,200,24],"value":"typed"}],"children_left_out":3},"nodes":3,"left_out":3,"not_showing":0}`

func TestParseAXTree(t *testing.T) {
	tree, err := parseAXTree([]byte(walked))
	if err != nil {
		t.Fatal(err)
	}
	if tree.Root == nil || len(tree.Root.Children) != 2 || tree.Root.Children[0].Name != "Press me" || tree.LeftOut != 3 || tree.Application != "Chromium" {
		t.Fatalf("%+v", tree)
	}
	if v := tree.Root.Children[1].Value; v == nil || *v != "typed" {
		t.Errorf("the entry's value: %v", v)
	}
	if tree.Root.Children[0].States == nil {
		t.Error("states must never be null")
	}
	empty, err := parseAXTree([]byte(`{"scope":"focused","root":null,"nodes":0,"left_out":0,"note":"no window is active"}`))
	if err != nil || empty.Root != nil || empty.Note == "" {
		t.Errorf("no active window: %+v %v", empty, err)
	}
	for _, bad := range []string{``, `{}`, `{"scope":"all","root":null,"nodes":0,"left_out":0}`, `{"scope":"focused","root":{"role":"x","name":"","states":[],"bounds":[1,2]},"nodes":1,"left_out":0}`, `{"scope":"focused","extra":1}`, `Traceback`} {
		if _, err := parseAXTree([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseAXTree(f *testing.F) {
	f.Add([]byte(walked))
	f.Add([]byte(`{"scope":"screen","root":{"role":"desktop frame","name":"main","states":[]},"nodes":1,"left_out":0}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		tree, err := parseAXTree(out)
		if err != nil {
			return
		}
		if tree.Scope != AXFocused && tree.Scope != AXScreen {
			t.Fatalf("scope %q", tree.Scope)
		}
		if tree.Root != nil {
			boundsInSpace(tree.Root, screenshot.ScaleTo(1280, 800, 640, 400))
		}
	})
}

func TestAXOptionsCheck(t *testing.T) {
	o := AXOptions{}
	if err := o.Check(); err != nil || o.Scope != AXFocused || o.MaxDepth != DefaultAXDepth || o.MaxNodes != DefaultAXNodes {
		t.Errorf("defaults: %+v %v", o, err)
	}
	for field, o := range map[string]AXOptions{
		"scope":     {Scope: "window"},
		"max_depth": {MaxDepth: MaxAXDepth + 1},
		"max_nodes": {MaxNodes: -1},
	} {
		err := o.Check()
		var fe interface{ FieldName() string }
		if !errors.As(err, &fe) || fe.FieldName() != field {
			t.Errorf("%+v: %v, want an error on %s", o, err, field)
		}
	}
}

func TestBoundsInSpace(t *testing.T) {
	tree, err := parseAXTree([]byte(walked))
	if err != nil {
		t.Fatal(err)
	}
	boundsInSpace(tree.Root, screenshot.ScaleTo(1280, 800, 640, 400))
	if b := tree.Root.Bounds; b[0] != 0 || b[1] != 0 || b[2] != 640 || b[3] != 400 {
		t.Errorf("the whole screen at 640x400: %v", b)
	}
	if b := tree.Root.Children[0].Bounds; b[0] != 50 || b[1] != 100 || b[2] < 39 || b[2] > 41 {
		t.Errorf("the button at 640x400: %v", b)
	}
}
