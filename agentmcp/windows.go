package agentmcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
)

const windowsDescription = "List the desktop's windows (id, title, class, pid, geometry of the content area, focused) " +
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
	c, err := s.opts.Client(req)
	if err != nil {
		return nil, WindowsOutput{}, err
	}
	id, err := s.desktop(in.DesktopRef)
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
