package drive

import (
	"strings"
	"testing"
)

func ax(id, parent, role, name string, backend int64, children ...string) axNode {
	n := axNode{NodeID: id, Parent: parent, Backend: backend, Child: children}
	if role != "" {
		n.Role = &axValue{Value: role}
	}
	if name != "" {
		n.Name = &axValue{Value: name}
	}
	return n
}

// A page's tree as Chromium gives it, flattened the way read_page shows
// it: quiet wrappers dropped, their children in their place, refs stable.
func TestReadPageTree(t *testing.T) {
	nodes := []axNode{
		ax("1", "", "RootWebArea", "toolset form", 1, "2", "5"),
		ax("2", "1", "generic", "", 2, "3", "4"),
		ax("3", "2", "heading", "Sign up", 3),
		ax("4", "2", "textbox", "Name", 4),
		ax("5", "1", "generic", "", 5, "6", "7"),
		ax("6", "5", "button", "Send", 6),
		{NodeID: "7", Parent: "5", Ignored: true, Child: []string{"8"}},
		ax("8", "7", "link", "Help", 8),
	}
	refs := map[int64]string{}
	ref := func(b int64) string {
		if r, ok := refs[b]; ok {
			return r
		}
		refs[b] = "ref_" + string(rune('0'+len(refs)+1))
		return refs[b]
	}
	got := renderTree(flattenAX(nodes, 0, 15, false), ref, true)
	want := "heading \"Sign up\" [ref_1]\ntextbox \"Name\" [ref_2]\nbutton \"Send\" [ref_3]\nlink \"Help\" [ref_4]"
	if got != want {
		t.Errorf("read_page:\n%s\nwant\n%s", got, want)
	}
	if got := renderTree(flattenAX(nodes, 0, 15, true), ref, true); got != "textbox \"Name\" [ref_2]\nbutton \"Send\" [ref_3]\nlink \"Help\" [ref_4]" {
		t.Errorf("interactive, with the refs already given:\n%s", got)
	}
	if got := flattenAX(nodes, 5, 15, false); len(got) != 2 || got[0].name != "Send" {
		t.Errorf("a subtree: %+v", got)
	}
	if got := flattenAX(nodes, 0, 1, false); len(got) != 4 {
		t.Errorf("depth 1 lists the top level (the wrappers are not levels): %+v", got)
	}
	found := findLines(flattenAX(nodes, 0, 15, false), "send button")
	if len(found) != 1 || found[0].name != "Send" {
		t.Errorf("find: %+v", found)
	}
}

// The text is capped, and says where it was cut.
func TestReadPageCap(t *testing.T) {
	var lines []treeLine
	for i := range 5000 {
		lines = append(lines, treeLine{role: "link", name: strings.Repeat("x", 20), backend: int64(i + 1)})
	}
	got := renderTree(lines, func(int64) string { return "ref_1" }, true)
	if len(got) > MaxPageText || !strings.Contains(got, "(cut at ") {
		t.Errorf("%d characters, ends %q", len(got), got[len(got)-120:])
	}
}

// Chords name DevTools' keys; a key the executor cannot send is refused
// with the names it can.
func TestKeyChords(t *testing.T) {
	mods, key, err := parseKeyChord("ctrl+shift+p")
	if err != nil || len(mods) != 2 || modifierBit(mods[0]) != modCtrl || modifierBit(mods[1]) != modShift || key.key != "p" || key.code != "KeyP" {
		t.Errorf("ctrl+shift+p: %+v %+v %v", mods, key, err)
	}
	for name, want := range map[string]string{"Return": "Enter", "BackSpace": "Backspace", "Escape": "Escape", "Up": "ArrowUp", "F5": "F5", "space": " ", "+": "+"} {
		if _, k, err := parseKeyChord(name); err != nil || k.key != want {
			t.Errorf("%s: %+v %v, want %s", name, k, err, want)
		}
	}
	for _, bad := range []string{"a+b", "hyper", "F25", "ctrl+"} {
		if _, _, err := parseKeyChord(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
