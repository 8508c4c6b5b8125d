package web

import (
	"fmt"
	"image"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
)

// windowRoutes registers the window list and its operations, and the
// accessibility tree. They need the control role: focus and close change
// what an agent's keys reach, and the tree holds text a screenshot does
// not show (scrolled out of view, in fields of other windows).
func (s *Server) windowRoutes(g *gin.RouterGroup) {
	g.GET("/desktops/:id/windows", need(needControl), s.getWindows)
	g.POST("/desktops/:id/windows/:window/:op", need(needControl), s.postWindowOp)
	g.GET("/desktops/:id/accessibility", need(needControl), s.getAccessibility)
}

// windowDisplay reads the declared display of a window request's query.
func windowDisplay(c *gin.Context) (image.Point, bool) {
	w, ok := dimParam(c, []string{"display_width"}, "X-Display-Width")
	if !ok {
		return image.Point{}, false
	}
	h, ok := dimParam(c, []string{"display_height"}, "X-Display-Height")
	if !ok {
		return image.Point{}, false
	}
	d, err := displaySize(w, h, "display_width", "display_height")
	if err != nil {
		failWith(c, err)
		return image.Point{}, false
	}
	return d, true
}

func (s *Server) getWindows(c *gin.Context) {
	display, ok := windowDisplay(c)
	if !ok {
		return
	}
	wins, err := s.cfg.Drive.Windows(c.Request.Context(), c.Param("id"), display)
	if err != nil {
		fail(c, err)
		return
	}
	out := api.Windows{Windows: make([]api.Window, 0, len(wins))}
	for _, w := range wins {
		out.Windows = append(out.Windows, apiWindow(w))
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) postWindowOp(c *gin.Context) {
	ctx, id, win := c.Request.Context(), c.Param("id"), c.Param("window")
	switch op := c.Param("op"); op {
	case "focus":
		display, ok := windowDisplay(c)
		if !ok {
			return
		}
		w, err := s.cfg.Drive.FocusWindow(ctx, id, win, display)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, apiWindow(w))
	case "close":
		closed, err := s.cfg.Drive.CloseWindow(ctx, id, win)
		if err != nil {
			fail(c, err)
			return
		}
		wid, _ := drive.WindowID(win)
		c.JSON(http.StatusOK, api.WindowClosed{ID: wid, Closed: closed})
	case "move", "resize":
		var req api.WindowPlacement
		if !decodeJSON(c, &req) {
			return
		}
		display, err := displaySize(req.DisplayWidth, req.DisplayHeight, "display_width", "display_height")
		if err != nil {
			failWith(c, err)
			return
		}
		p := drive.Placement{X: req.X, Y: req.Y}
		if op == "resize" {
			p = drive.Placement{Width: req.Width, Height: req.Height}
			if req.X != nil || req.Y != nil {
				badRequest(c, "x", "resize takes width and height; move a window with .../move")
				return
			}
		} else if req.Width != nil || req.Height != nil {
			badRequest(c, "width", "move takes x and y; resize a window with .../resize")
			return
		}
		w, err := s.cfg.Drive.PlaceWindow(ctx, id, win, p, display)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, apiWindow(w))
	default:
		abort(c, http.StatusNotFound, "not_found", "no window operation "+op+": use focus, close, move or resize", "")
	}
}

func apiWindow(w drive.Window) api.Window {
	return api.Window{
		ID: w.ID, Title: w.Title, Class: w.Class, Instance: w.Instance, PID: w.PID, Workspace: w.Workspace,
		X: w.X, Y: w.Y, Width: w.Width, Height: w.Height, Focused: w.Focused,
		Frame: api.Rect{X: w.Frame.X, Y: w.Frame.Y, Width: w.Frame.Width, Height: w.Frame.Height},
	}
}

func (s *Server) getAccessibility(c *gin.Context) {
	display, ok := windowDisplay(c)
	if !ok {
		return
	}
	o := drive.AXOptions{Scope: c.Query("scope"), Display: display}
	switch h := c.Query("hidden"); h {
	case "", "false", "0":
	case "true", "1":
		o.Hidden = true
	default:
		badRequest(c, "hidden", fmt.Sprintf("hidden %q: use true or false", h))
		return
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"max_depth", &o.MaxDepth}, {"max_nodes", &o.MaxNodes}} {
		if raw := c.Query(p.name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil {
				badRequest(c, p.name, fmt.Sprintf("%s %q: give a whole number", p.name, raw))
				return
			}
			*p.v = n
		}
	}
	tree, err := s.cfg.Drive.Accessibility(c.Request.Context(), c.Param("id"), o)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, tree)
}
