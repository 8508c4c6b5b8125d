package browsertool

import "slices"

// ToolsetType is the tools entry's type this package speaks.
const ToolsetType = "browser_toolset_20260801"

// ToolsetName is what every member's tool_use and tool_result carry in
// toolset_name.
const ToolsetName = "browser"

// The members, in the docs' order.
const (
	Navigate       = "navigate"
	Screenshot     = "screenshot"
	Zoom           = "zoom"
	LeftClick      = "left_click"
	RightClick     = "right_click"
	MiddleClick    = "middle_click"
	DoubleClick    = "double_click"
	TripleClick    = "triple_click"
	Hover          = "hover"
	LeftClickDrag  = "left_click_drag"
	LeftMouseDown  = "left_mouse_down"
	LeftMouseUp    = "left_mouse_up"
	MouseMove      = "mouse_move"
	Scroll         = "scroll"
	ScrollTo       = "scroll_to"
	Type           = "type"
	Key            = "key"
	HoldKey        = "hold_key"
	Wait           = "wait"
	ReadPage       = "read_page"
	Find           = "find"
	GetPageText    = "get_page_text"
	FormInput      = "form_input"
	FileUpload     = "file_upload"
	ReadConsole    = "read_console"
	ReadNetwork    = "read_network"
	JavascriptExec = "javascript_exec"
	NewTab         = "new_tab"
	ListTabs       = "list_tabs"
	SwitchTab      = "switch_tab"
	CloseTab       = "close_tab"
)

// Members lists every member of the toolset.
func Members() []string {
	return []string{
		Navigate, Screenshot, Zoom, LeftClick, RightClick, MiddleClick, DoubleClick, TripleClick,
		Hover, LeftClickDrag, LeftMouseDown, LeftMouseUp, MouseMove, Scroll, ScrollTo, Type, Key,
		HoldKey, Wait, ReadPage, Find, GetPageText, FormInput, FileUpload, ReadConsole, ReadNetwork,
		JavascriptExec, NewTab, ListTabs, SwitchTab, CloseTab,
	}
}

// IsMember tells whether name is a member of the toolset.
func IsMember(name string) bool { return slices.Contains(Members(), name) }

// OffByDefault tells whether a member is disabled unless the toolset's
// configs enable it.
func OffByDefault(name string) bool {
	switch name {
	case JavascriptExec, FileUpload, ReadConsole, ReadNetwork:
		return true
	}
	return false
}

// IsTabMember tells whether a member manages tabs: its successful result
// is exactly one browser_state block, and it takes no optional tab_id.
func IsTabMember(name string) bool {
	switch name {
	case NewTab, ListTabs, SwitchTab, CloseTab:
		return true
	}
	return false
}

// returnsImage tells whether a member's successful result must hold an
// image block.
func returnsImage(name string) bool { return name == Screenshot || name == Zoom }

// clicks are the members that click a Target.
var clicks = []string{LeftClick, RightClick, MiddleClick, DoubleClick, TripleClick}

// fields lists the input fields each member accepts (besides tab_id,
// which every member but the tab members takes) and which it requires.
func fields(member string) (accepted, required []string) {
	switch member {
	case Navigate:
		return []string{"url"}, []string{"url"}
	case Screenshot, GetPageText, ReadConsole, ReadNetwork, NewTab, ListTabs:
		return nil, nil
	case Zoom:
		return []string{"region"}, []string{"region"}
	case LeftClick, RightClick, MiddleClick, DoubleClick, TripleClick:
		return []string{"target", "modifiers"}, []string{"target"}
	case Hover, LeftMouseDown, LeftMouseUp, MouseMove, ScrollTo:
		return []string{"target"}, []string{"target"}
	case LeftClickDrag:
		return []string{"from", "target"}, []string{"from", "target"}
	case Scroll:
		return []string{"target", "scroll_direction", "scroll_amount"}, []string{"target", "scroll_direction"}
	case Type, JavascriptExec:
		return []string{"text"}, []string{"text"}
	case Key:
		return []string{"text", "repeat"}, []string{"text"}
	case HoldKey:
		return []string{"text", "duration"}, []string{"text", "duration"}
	case Wait:
		return []string{"duration"}, []string{"duration"}
	case ReadPage:
		return []string{"filter", "depth", "ref"}, nil
	case Find:
		return []string{"query"}, []string{"query"}
	case FormInput:
		return []string{"target", "value"}, []string{"target", "value"}
	case FileUpload:
		return []string{"target", "paths", "document_ids"}, []string{"target"}
	case SwitchTab, CloseTab:
		return []string{"tab_id"}, []string{"tab_id"}
	}
	return nil, nil
}
