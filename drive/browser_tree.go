package drive

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// axNode is one node of Chromium's accessibility tree
// (Accessibility.getFullAXTree), as read_page and find use it.
type axNode struct {
	NodeID  string   `json:"nodeId"`
	Ignored bool     `json:"ignored"`
	Role    *axValue `json:"role"`
	Name    *axValue `json:"name"`
	Value   *axValue `json:"value"`
	Child   []string `json:"childIds"`
	Parent  string   `json:"parentId"`
	Backend int64    `json:"backendDOMNodeId"`
}

type axValue struct {
	Value any `json:"value"`
}

func (v *axValue) text() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return strings.TrimSpace(fmt.Sprint(v.Value))
}

// interactiveRoles are the roles read_page's "interactive" filter keeps.
var interactiveRoles = []string{
	"button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox",
	"option", "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider",
	"spinbutton", "treeitem", "textarea", "select", "PopUpButton",
}

// quietRoles carry no meaning of their own: their children are listed in
// their place.
var quietRoles = []string{"generic", "none", "presentation", "InlineTextBox", "LineBreak", "RootWebArea", "WebArea", "paragraph", "section", "div", "group", "Section"}

// MaxPageText caps read_page's, find's and get_page_text's text, as the
// docs ask; the text says when it was cut.
const MaxPageText = 50_000

// treeLine is one element of a read: its depth, text and DOM node.
type treeLine struct {
	depth   int
	role    string
	name    string
	value   string
	backend int64
}

// flattenAX walks the tree from its root (or from the node of backend
// root, when not 0) in document order, skipping ignored and quiet nodes
// (their children take their place) up to depth levels of listed nodes.
// interactive keeps only interactive roles.
func flattenAX(nodes []axNode, root int64, depth int, interactive bool) []treeLine {
	byID := make(map[string]*axNode, len(nodes))
	for i := range nodes {
		byID[nodes[i].NodeID] = &nodes[i]
	}
	var start *axNode
	for i := range nodes {
		n := &nodes[i]
		if root != 0 && n.Backend == root || root == 0 && (n.Parent == "" || byID[n.Parent] == nil) {
			start = n
			break
		}
	}
	if start == nil {
		return nil
	}
	var out []treeLine
	var walk func(n *axNode, level int)
	walk = func(n *axNode, level int) {
		role := n.Role.text()
		name := n.Name.text()
		listed := !n.Ignored && !slices.Contains(quietRoles, role) && !(role == "StaticText" && name == "")
		if interactive {
			listed = listed && slices.Contains(interactiveRoles, role)
		}
		next := level
		if listed {
			if level >= depth {
				return
			}
			out = append(out, treeLine{depth: level, role: role, name: name, value: n.Value.text(), backend: n.Backend})
			next = level + 1
		}
		for _, c := range n.Child {
			if child := byID[c]; child != nil {
				walk(child, next)
			}
		}
	}
	walk(start, 0)
	return out
}

// renderTree writes lines as the docs show them, `role "name" [ref_N]`,
// indented two spaces a level (flat for find), with ref giving each
// line's element its ref; it stops before MaxPageText and says so.
func renderTree(lines []treeLine, ref func(backend int64) string, indent bool) string {
	var b strings.Builder
	for i, l := range lines {
		var line strings.Builder
		if indent {
			line.WriteString(strings.Repeat("  ", l.depth))
		}
		line.WriteString(l.role)
		if l.name != "" {
			fmt.Fprintf(&line, " %q", l.name)
		}
		if l.value != "" && l.value != l.name {
			fmt.Fprintf(&line, " value=%q", l.value)
		}
		if l.backend != 0 {
			fmt.Fprintf(&line, " [%s]", ref(l.backend))
		}
		line.WriteByte('\n')
		if b.Len()+line.Len() > MaxPageText-200 {
			fmt.Fprintf(&b, "(cut at %d of %d elements: the text is capped at %d characters; read a subtree with ref, or a smaller depth)\n", i, len(lines), MaxPageText)
			break
		}
		b.WriteString(line.String())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// MaxFound is how many elements find returns at most.
const MaxFound = 20

// findLines ranks the elements with a role by how many of the query's
// words their role, name and value hold (a keyword match, not a semantic
// search), interactive elements first on a tie, and keeps the best
// MaxFound with at least one word.
func findLines(lines []treeLine, query string) []treeLine {
	words := strings.Fields(strings.ToLower(query))
	type scored struct {
		treeLine
		score, order int
	}
	var found []scored
	for i, l := range lines {
		hay := strings.ToLower(l.role + " " + l.name + " " + l.value)
		score := 0
		for _, w := range words {
			if strings.Contains(hay, w) {
				score += 2
			}
		}
		if score == 0 || l.backend == 0 {
			continue
		}
		if slices.Contains(interactiveRoles, l.role) {
			score++
		}
		found = append(found, scored{treeLine: l, score: score, order: i})
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].score > found[j].score })
	if len(found) > MaxFound {
		found = found[:MaxFound]
	}
	out := make([]treeLine, len(found))
	for i, f := range found {
		out[i] = f.treeLine
		out[i].depth = 0
	}
	return out
}
