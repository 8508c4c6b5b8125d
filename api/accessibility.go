package api

// AXNode is a node of a desktop's accessibility tree (AT-SPI): what an
// assistive technology sees of an application.
type AXNode struct {
	// Role is AT-SPI's role name ("push button", "entry", "document web").
	Role string `json:"role"`
	Name string `json:"name"`
	// States are AT-SPI's state names ("focused", "editable", "checked").
	States []string `json:"states"`
	// Bounds is [x, y, width, height] on the screen, in native pixels or
	// the declared display's; absent when the node shows nothing.
	Bounds []int `json:"bounds,omitempty"`
	// Value is the text of an editable node (up to 300 characters).
	Value *string `json:"value,omitempty"`
	// ChildrenLeftOut counts children not walked: past a limit.
	ChildrenLeftOut int      `json:"children_left_out,omitempty"`
	Children        []AXNode `json:"children,omitempty"`
}

// AXTree answers GET /v1/desktops/{id}/accessibility: a walk of the tree
// from the active window (scope focused) or from the desktop, every
// application under it (scope screen).
type AXTree struct {
	Scope string `json:"scope"`
	// Application is the active window's application, for scope focused.
	Application string  `json:"application,omitempty"`
	Root        *AXNode `json:"root"`
	Nodes       int     `json:"nodes"`
	// LeftOut counts children not walked (past max_depth or max_nodes);
	// Note says so in words, or that no window is active.
	LeftOut int `json:"left_out"`
	// NotShowing counts nodes left out because they are not on the screen
	// (hidden menus and panels, content scrolled away), unless the request
	// asked for hidden ones.
	NotShowing int    `json:"not_showing"`
	Note       string `json:"note,omitempty"`
}
