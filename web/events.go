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

// eventStream sends events as server-sent events, for the dashboard;
// ?desktop=ID narrows them to one desktop. In a fleet, a stream not narrowed
// to a desktop is the fleet's: this host's desktops and pulls, then the
// other hosts' streams, passed on as they come.
func (s *Server) eventStream(c *gin.Context) {
	only := c.Query("desktop")
	if g, ok := grantOf(c); ok {
		only = g.desktop
	}
	events, stop := s.cfg.Manager.Events().Subscribe()
	defer stop()
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	defer s.endOnRevoke(c, cancel)()
	var pulls <-chan api.Event // nil: none, on a single host or for one desktop
	var peers <-chan []byte
	if only == "" && s.cfg.PullEvents != nil {
		ch, stopPulls := s.cfg.PullEvents()
		defer stopPulls()
		pulls = ch
	}
	if only == "" && s.cfg.Peers != nil && c.Request.Header.Get(proxiedBy) == "" {
		peers = s.followPeers(ctx, c.Request.Header.Get("Authorization"), cancel)
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	fmt.Fprint(c.Writer, ": warmdesk events\n\n")
	c.Writer.Flush()
	send := func(ev api.Event) {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(c.Writer, "event: %s\ndata: %s\n\n", ev.Type, b)
		c.Writer.Flush()
	}
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
			view := s.view(ev.Desktop)
			send(api.Event{Type: string(ev.Type), Desktop: &view, Host: s.cfg.HostName, Time: ev.Time, Summary: ev.Summary})
		case ev, ok := <-pulls:
			if !ok {
				return
			}
			send(ev)
		case block := <-peers:
			c.Writer.Write(block)
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
	events, unsubscribe := s.cfg.Manager.Events().Subscribe()
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
