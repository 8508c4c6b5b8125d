package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/warmdesk/warmdesk/api"
)

// Display is a declared coordinate space (the size of the picture an
// agent works on); zero is native pixels.
type Display struct{ Width, Height int }

func (d Display) query() string {
	if d.Width == 0 && d.Height == 0 {
		return ""
	}
	return fmt.Sprintf("?display_width=%d&display_height=%d", d.Width, d.Height)
}

func windowPath(id, win, op string) string {
	return desktopPath(id, "/windows/"+url.PathEscape(win)+"/"+op)
}

// Windows lists a desktop's top-level windows, oldest first.
func (c *Client) Windows(ctx context.Context, id string, d Display) ([]api.Window, error) {
	var out api.Windows
	err := c.Do(ctx, http.MethodGet, desktopPath(id, "/windows")+d.query(), nil, &out)
	return out.Windows, err
}

// FocusWindow activates a window and returns it.
func (c *Client) FocusWindow(ctx context.Context, id, win string, d Display) (api.Window, error) {
	var out api.Window
	err := c.Do(ctx, http.MethodPost, windowPath(id, win, "focus")+d.query(), nil, &out)
	return out, err
}

// CloseWindow asks a window to close; closed is false when it is still
// open a few seconds later.
func (c *Client) CloseWindow(ctx context.Context, id, win string) (closed bool, err error) {
	var out api.WindowClosed
	err = c.Do(ctx, http.MethodPost, windowPath(id, win, "close"), nil, &out)
	return out.Closed, err
}

// MoveWindow puts a window's client area's top-left corner at x, y and
// returns where the window manager placed it.
func (c *Client) MoveWindow(ctx context.Context, id, win string, x, y int, d Display) (api.Window, error) {
	var out api.Window
	err := c.Do(ctx, http.MethodPost, windowPath(id, win, "move"), api.WindowPlacement{X: &x, Y: &y, DisplayWidth: d.Width, DisplayHeight: d.Height}, &out)
	return out, err
}

// ResizeWindow sizes a window's client area and returns the size the
// window took (a terminal keeps whole character cells).
func (c *Client) ResizeWindow(ctx context.Context, id, win string, width, height int, d Display) (api.Window, error) {
	var out api.Window
	err := c.Do(ctx, http.MethodPost, windowPath(id, win, "resize"), api.WindowPlacement{Width: &width, Height: &height, DisplayWidth: d.Width, DisplayHeight: d.Height}, &out)
	return out, err
}

// AXQuery asks for a walk of the accessibility tree: Scope "focused" (the
// default) or "screen"; zero limits take the server's defaults.
type AXQuery struct {
	Scope              string
	MaxDepth, MaxNodes int
	// Hidden includes nodes not showing on the screen.
	Hidden  bool
	Display Display
}

// Accessibility walks a desktop's accessibility tree.
func (c *Client) Accessibility(ctx context.Context, id string, q AXQuery) (api.AXTree, error) {
	v := url.Values{}
	if q.Scope != "" {
		v.Set("scope", q.Scope)
	}
	if q.MaxDepth != 0 {
		v.Set("max_depth", strconv.Itoa(q.MaxDepth))
	}
	if q.MaxNodes != 0 {
		v.Set("max_nodes", strconv.Itoa(q.MaxNodes))
	}
	if q.Hidden {
		v.Set("hidden", "true")
	}
	if q.Display.Width != 0 || q.Display.Height != 0 {
		v.Set("display_width", strconv.Itoa(q.Display.Width))
		v.Set("display_height", strconv.Itoa(q.Display.Height))
	}
	path := desktopPath(id, "/accessibility")
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out api.AXTree
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
