package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/vnc"
)

// tcpListeners are the plain RFB listeners on loopback that ordinary VNC
// clients (vncsnapshot, TigerVNC) can be pointed at: off until asked for,
// one per desktop, closed when the desktop goes or on DELETE.
type tcpListeners struct {
	mu sync.Mutex
	by map[string]*tcpListener
}

type tcpListener struct {
	l        *vnc.TCPListener
	viewOnly bool
	cancel   context.CancelFunc
}

func (s *Server) openVNCListener(c *gin.Context) {
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return
	}
	var req api.OpenVNCListener
	if !decodeJSON(c, &req) {
		return
	}
	viewOnly := req.ViewOnly == nil || *req.ViewOnly
	scr, ok := s.cfg.Drive.Screen(id)
	if !ok || !d.State.Live() {
		fail(c, &desktop.TransitionError{ID: id, From: d.State, Action: "open a VNC listener on"})
		return
	}
	s.tcp.mu.Lock()
	defer s.tcp.mu.Unlock()
	if s.tcp.by == nil {
		s.tcp.by = map[string]*tcpListener{}
	}
	if cur, ok := s.tcp.by[id]; ok {
		if cur.viewOnly == viewOnly {
			c.JSON(http.StatusOK, api.VNCListener{Address: cur.l.Addr().String(), Password: cur.l.Password(), ViewOnly: viewOnly})
			return
		}
		cur.cancel()
		delete(s.tcp.by, id)
	}
	// The listener lives until the desktop goes or it is closed, not as
	// long as this request.
	ctx, cancel := context.WithCancel(context.Background())
	l, err := vnc.ListenTCP(ctx, "127.0.0.1:0", scr.Dial, vnc.ProxyOptions{ViewOnly: viewOnly, Logger: s.log.With("desktop", id), Stats: &s.vnc})
	if err != nil {
		cancel()
		fail(c, fmt.Errorf("open a VNC listener: %w", err))
		return
	}
	entry := &tcpListener{l: l, viewOnly: viewOnly, cancel: func() { cancel(); l.Close() }}
	s.tcp.by[id] = entry
	go s.closeWhenGone(id, entry)
	c.JSON(http.StatusCreated, api.VNCListener{Address: l.Addr().String(), Password: l.Password(), ViewOnly: viewOnly})
}

// closeWhenGone closes a desktop's listener when the desktop is deleted.
func (s *Server) closeWhenGone(id string, entry *tcpListener) {
	events, stop := s.cfg.Manager.Events().Subscribe()
	defer stop()
	for ev := range events {
		if ev.Desktop.ID == id && (ev.Type == desktop.EventDeleted || !ev.Desktop.State.Live()) {
			break
		}
	}
	s.tcp.mu.Lock()
	if s.tcp.by[id] == entry {
		delete(s.tcp.by, id)
	}
	s.tcp.mu.Unlock()
	entry.cancel()
}

func (s *Server) closeVNCListener(c *gin.Context) {
	id := c.Param("id")
	s.tcp.mu.Lock()
	entry, ok := s.tcp.by[id]
	delete(s.tcp.by, id)
	s.tcp.mu.Unlock()
	if !ok {
		abort(c, http.StatusNotFound, "not_found", fmt.Sprintf("desktop %s has no VNC listener", id), "")
		return
	}
	entry.cancel()
	c.Status(http.StatusNoContent)
}
