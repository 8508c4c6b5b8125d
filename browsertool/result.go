package browsertool

import (
	"fmt"
	"strconv"

	"github.com/warmdesk/warmdesk/input"
)

// Block is one content block of a member's tool_result: text, image or
// browser_state.
type Block struct {
	Type string `json:"type"`
	// Text is a text block's.
	Text string `json:"text,omitempty"`
	// Source is an image block's.
	Source *ImageSource `json:"source,omitempty"`
	// Tabs and StateChanges are a browser_state block's. Tabs is always
	// sent on one (it may be empty).
	*BrowserState
}

// ImageSource is an image block's base64 picture, as the computer tool's.
type ImageSource = input.AnthropicImageSource

// BrowserState is the browser's tabs after a call, and what changed
// during it.
type BrowserState struct {
	Tabs         []Tab         `json:"tabs"`
	StateChanges []StateChange `json:"state_changes,omitempty"`
}

// Tab is one open tab.
type Tab struct {
	TabID  string `json:"tab_id"`
	Title  string `json:"title"`
	URL    string `json:"url"`
	Active bool   `json:"active,omitempty"`
}

// StateChange is a tab opened or a download's progress.
type StateChange struct {
	Type       string `json:"type"` // tab_opened, download_started, download_completed, download_failed
	TabID      string `json:"tab_id,omitempty"`
	DownloadID string `json:"download_id,omitempty"`
	URL        string `json:"url,omitempty"`
	Path       string `json:"path,omitempty"`
	SizeBytes  *int64 `json:"size_bytes,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Limits of a browser_state block.
const (
	MaxTabs         = 100
	MaxStateChanges = 200
)

// Validate applies the docs' rules and limits for a browser_state block,
// which the Messages API refuses a request over: an executor that broke
// one has a bug, and its result must not reach the model.
func (s BrowserState) Validate() error {
	if len(s.Tabs) > MaxTabs {
		return fmt.Errorf("browser_state: %d tabs, more than %d", len(s.Tabs), MaxTabs)
	}
	if len(s.StateChanges) > MaxStateChanges {
		return fmt.Errorf("browser_state: %d state changes, more than %d", len(s.StateChanges), MaxStateChanges)
	}
	active := 0
	ids := map[string]bool{}
	for i, t := range s.Tabs {
		field := "browser_state.tabs[" + strconv.Itoa(i) + "]"
		if t.TabID == "" {
			return fmt.Errorf("%s.tab_id: empty", field)
		}
		if ids[t.TabID] {
			return fmt.Errorf("%s.tab_id: %q listed twice", field, t.TabID)
		}
		ids[t.TabID] = true
		for name, v := range map[string]string{"tab_id": t.TabID, "title": t.Title, "url": t.URL} {
			if err := checkRendered(v); err != nil {
				return fmt.Errorf("%s.%s: %w", field, name, err)
			}
		}
		if t.Active {
			active++
		}
	}
	if len(s.Tabs) > 0 && active != 1 {
		return fmt.Errorf("browser_state: %d active tabs, want exactly one", active)
	}
	downloads := map[string]bool{}
	for i, c := range s.StateChanges {
		field := "browser_state.state_changes[" + strconv.Itoa(i) + "]"
		values := map[string]string{}
		switch c.Type {
		case "tab_opened":
			if !ids[c.TabID] {
				return fmt.Errorf("%s: tab_opened names %q, which is not in tabs", field, c.TabID)
			}
			if c.DownloadID != "" || c.URL != "" || c.Path != "" || c.SizeBytes != nil || c.Error != "" {
				return fmt.Errorf("%s: tab_opened has only tab_id", field)
			}
			continue
		case "download_started", "download_completed", "download_failed":
			if c.TabID != "" {
				return fmt.Errorf("%s: a download change has no tab_id", field)
			}
			if c.Type != "download_completed" && (c.Path != "" || c.SizeBytes != nil) {
				return fmt.Errorf("%s: only download_completed has path and size_bytes", field)
			}
			if c.Type != "download_failed" && c.Error != "" {
				return fmt.Errorf("%s: only download_failed has error", field)
			}
			if c.SizeBytes != nil && *c.SizeBytes < 0 {
				return fmt.Errorf("%s.size_bytes: %d is negative", field, *c.SizeBytes)
			}
			if c.DownloadID == "" {
				return fmt.Errorf("%s.download_id: empty", field)
			}
			if downloads[c.DownloadID] {
				return fmt.Errorf("%s: a second change for download %q in one block", field, c.DownloadID)
			}
			downloads[c.DownloadID] = true
			values = map[string]string{"download_id": c.DownloadID, "url": c.URL, "path": c.Path, "error": c.Error}
		default:
			return fmt.Errorf("%s.type: %q is not a state change", field, c.Type)
		}
		for name, v := range values {
			if err := checkRendered(v); err != nil {
				return fmt.Errorf("%s.%s: %w", field, name, err)
			}
		}
	}
	return nil
}

// ToolResult is a member's tool_result block.
type ToolResult struct {
	Type        string  `json:"type"` // "tool_result"
	ToolUseID   string  `json:"tool_use_id"`
	ToolsetName string  `json:"toolset_name"`
	IsError     bool    `json:"is_error,omitempty"`
	Content     []Block `json:"content"`
}

func textBlock(s string) Block { return Block{Type: "text", Text: s} }

// errorResult answers a call with is_error and text, which is never empty
// (the API refuses an empty error).
func errorResult(id, text string) ToolResult {
	if text == "" {
		text = "The tool call failed with an empty error message."
	}
	return ToolResult{Type: "tool_result", ToolUseID: id, ToolsetName: ToolsetName, IsError: true, Content: []Block{textBlock(text)}}
}

// Ack is a pure action's acknowledgment when the executor says nothing
// more: the SDK's wording.
func Ack(c Call) string {
	switch c.Member {
	case LeftClick:
		return "Clicked."
	case RightClick:
		return "Right-clicked."
	case MiddleClick:
		return "Middle-clicked."
	case DoubleClick:
		return "Double-clicked."
	case TripleClick:
		return "Triple-clicked."
	case Hover:
		return "Hovered."
	case LeftClickDrag:
		return "Dragged."
	case LeftMouseDown:
		return "Mouse button pressed."
	case LeftMouseUp:
		return "Mouse button released."
	case MouseMove:
		return "Moved the mouse."
	case Scroll:
		return "Scrolled " + c.Direction + "."
	case ScrollTo:
		return "Scrolled to " + c.Target.Ref + "."
	case Type:
		return "Typed."
	case Key:
		return "Pressed " + c.Text + "."
	case HoldKey:
		return fmt.Sprintf("Held %s for %ss.", c.Text, strconv.FormatFloat(c.Seconds, 'f', -1, 64))
	case FormInput:
		return "Set the value of " + c.Target.Ref + "."
	case Wait:
		return fmt.Sprintf("Waited %ss.", strconv.FormatFloat(c.Seconds, 'f', -1, 64))
	case FileUpload:
		return "Uploaded."
	case Navigate:
		return "Navigated to " + c.URL
	}
	return "(empty)"
}
