package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
)

const windowsDescription = "List the desktop's windows (id, title, class, pid, x, y, width and height of the content " +
	"area inside the title bar and border, frame: the whole window as the screenshot shows it, focused) " +
	"and focus, close, move or resize one. Actions: list; focus (window_id); close (window_id: asks it to close, as " +
	"its close button does; closed is false if it is still open, for example asking to confirm); move (window_id, x, y: " +
	"the new top-left corner of its content); resize (window_id, width, height of its content; a terminal keeps whole " +
	"character cells). Coordinates are pixels of the screenshots the computer tool returns."

// WindowsInput is the windows tool's input.
type WindowsInput struct {
	DesktopRef
	Action   string `json:"action" jsonschema:"list, focus, close, move or resize"`
	WindowID string `json:"window_id,omitempty" jsonschema:"the window's id from list (such as 0x01c0000d), for every action but list"`
	X        *int   `json:"x,omitempty" jsonschema:"move: the new left edge of the window's content"`
	Y        *int   `json:"y,omitempty" jsonschema:"move: the new top edge of the window's content"`
	Width    *int   `json:"width,omitempty" jsonschema:"resize: the new width of the window's content"`
	Height   *int   `json:"height,omitempty" jsonschema:"resize: the new height of the window's content"`
}

// WindowsOutput is the windows tool's answer: the list, the window after
// a focus, move or resize, or whether a close took.
type WindowsOutput struct {
	Windows []api.Window `json:"windows,omitempty"`
	Window  *api.Window  `json:"window,omitempty"`
	Closed  *bool        `json:"closed,omitempty"`
}

func (s *session) windows(ctx context.Context, req *mcp.CallToolRequest, in WindowsInput) (*mcp.CallToolResult, WindowsOutput, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, WindowsOutput{}, err
	}
	d := client.Display{Width: s.opts.DisplayWidth, Height: s.opts.DisplayHeight}
	if in.Action != "list" && in.Action != "" && in.WindowID == "" {
		return nil, WindowsOutput{}, fmt.Errorf("%s: give window_id, from the list action", in.Action)
	}
	var out WindowsOutput
	var w api.Window
	switch in.Action {
	case "list":
		out.Windows, err = c.Windows(ctx, id, d)
		if err == nil && out.Windows == nil {
			out.Windows = []api.Window{}
		}
	case "focus":
		w, err = c.FocusWindow(ctx, id, in.WindowID, d)
		out.Window = &w
	case "close":
		var closed bool
		closed, err = c.CloseWindow(ctx, id, in.WindowID)
		out.Closed = &closed
	case "move":
		if in.X == nil || in.Y == nil {
			return nil, WindowsOutput{}, errors.New("move: give x and y")
		}
		w, err = c.MoveWindow(ctx, id, in.WindowID, *in.X, *in.Y, d)
		out.Window = &w
	case "resize":
		if in.Width == nil || in.Height == nil {
			return nil, WindowsOutput{}, errors.New("resize: give width and height")
		}
		w, err = c.ResizeWindow(ctx, id, in.WindowID, *in.Width, *in.Height, d)
		out.Window = &w
	default:
		return nil, WindowsOutput{}, fmt.Errorf("action %q: use list, focus, close, move or resize", in.Action)
	}
	if err != nil {
		return nil, WindowsOutput{}, apiError("windows "+in.Action, err)
	}
	return nil, out, nil
}

const accessibilityDescription = "Read the accessibility tree (AT-SPI) of the desktop's active window, or of every " +
	"application (scope screen): each node's role, name, states, bounds [x, y, width, height] and, for editable text, " +
	"value. Useful to find a control by its name and click the middle of its bounds. Bounds are pixels of the " +
	"screenshots the computer tool returns. Only images with an accessibility bus have a tree (the browser image); " +
	"a terminal exposes none."

// AccessibilityInput is the accessibility tool's input.
type AccessibilityInput struct {
	DesktopRef
	Scope    string `json:"scope,omitempty" jsonschema:"focused (the active window, the default) or screen (every application)"`
	MaxNodes int    `json:"max_nodes,omitempty" jsonschema:"at most this many nodes (default 500); the answer counts what it left out"`
	MaxDepth int    `json:"max_depth,omitempty" jsonschema:"at most this many levels (default 40)"`
}

// accessibility answers the tree as JSON text: a recursive type has no
// output schema the SDK can derive.
func (s *session) accessibility(ctx context.Context, req *mcp.CallToolRequest, in AccessibilityInput) (*mcp.CallToolResult, any, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, nil, err
	}
	tree, err := c.Accessibility(ctx, id, client.AXQuery{
		Scope: in.Scope, MaxDepth: in.MaxDepth, MaxNodes: in.MaxNodes,
		Display: client.Display{Width: s.opts.DisplayWidth, Height: s.opts.DisplayHeight},
	})
	if err != nil {
		return nil, nil, apiError("accessibility", err)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}
