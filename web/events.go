package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// eventStream sends desktop events as server-sent events, for the
// dashboard; ?desktop=ID narrows them to one desktop.
func (s *Server) eventStream(c *gin.Context) {
	only := c.Query("desktop")
	if g, ok := grantOf(c); ok {
		only = g.desktop
	}
	events, stop := s.cfg.Manager.Subscribe()
	defer stop()
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	defer s.endOnRevoke(c, cancel)()
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	fmt.Fprint(c.Writer, ": warmdesk events\n\n")
	c.Writer.Flush()
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return // fell behind: the client reconnects and reloads
			}
			if only != "" && ev.Desktop.ID != only {
				continue
			}
			b, _ := json.Marshal(api.Event{Type: string(ev.Type), Desktop: s.view(ev.Desktop), Time: ev.Time, Summary: ev.Summary})
			fmt.Fprintf(c.Writer, "event: %s\ndata: %s\n\n", ev.Type, b)
			c.Writer.Flush()
		case <-keepalive.C:
			fmt.Fprint(c.Writer, ": keepalive\n\n")
			c.Writer.Flush()
		case <-ctx.Done():
			return
		}
	}
}

// onControlChange calls fn when control of a desktop passes back to the
// agent (or the desktop goes); the returned function stops watching.
func (s *Server) onControlChange(id string, fn func()) (stop func()) {
	events, unsubscribe := s.cfg.Manager.Subscribe()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					fn()
					return
				}
				if ev.Desktop.ID != id {
					continue
				}
				if ev.Type == desktop.EventDeleted || ev.Desktop.Control.Holder != desktop.ControlPerson {
					fn()
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); unsubscribe() }
}

func (s *Server) setControl(c *gin.Context) {
	var req api.SetControl
	if !decodeJSON(c, &req) {
		return
	}
	if req.Holder != string(desktop.ControlAgent) && req.Holder != string(desktop.ControlPerson) {
		badRequest(c, "holder", fmt.Sprintf("holder %q: use person (take control) or agent (hand it back)", req.Holder))
		return
	}
	if req.Holder == string(desktop.ControlPerson) && req.By == "" {
		req.By = "viewer"
	}
	d, err := s.cfg.Manager.SetControl(c.Param("id"), desktop.Controller(req.Holder), req.By)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.view(d))
}
