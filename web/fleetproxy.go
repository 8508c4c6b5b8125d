package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
)

// proxiedBy marks a request one host of a fleet passed to another: such a
// request is served where it lands, never passed on again.
const proxiedBy = "X-Warmdesk-Proxied-By"

// Locator finds the host of a fleet that runs a desktop this host does
// not: its API address, or ok false when no host has it.
type Locator func(ctx context.Context, id string) (address string, ok bool, err error)

// toOwner passes a request for a desktop that runs on another host of the
// fleet to that host, headers, body and WebSocket upgrade alike; the host
// that serves it checks the token (a fleet shares its daemon token, and a
// desktop's own tokens are checked where the desktop runs). Requests for
// this host's desktops, and for desktops no host has, go on here.
func (s *Server) toOwner(c *gin.Context) {
	id := c.Param("id")
	if s.cfg.Locate == nil || id == "" || !strings.HasPrefix(c.FullPath(), "/v1/desktops/:id") || c.Request.Header.Get(proxiedBy) != "" {
		c.Next()
		return
	}
	if _, err := s.cfg.Manager.Get(id); err == nil {
		c.Next()
		return
	}
	addr, ok, err := s.cfg.Locate(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		c.Abort()
		return
	}
	if !ok {
		c.Next()
		return
	}
	target := &url.URL{Scheme: "http", Host: addr}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.SetXForwarded()
			r.Out.Header.Set(proxiedBy, s.cfg.HostName)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("fleet proxy", "desktop", id, "host", addr, "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			json.NewEncoder(w).Encode(api.Error{Error: api.ErrorBody{Code: "host_unreachable",
				Message: "the host that runs desktop " + id + " (" + addr + ") did not answer: " + err.Error()}})
		},
		// Streams (events, exec, screenshots on change) pass at once.
		FlushInterval: -1,
	}
	p.ServeHTTP(c.Writer, c.Request)
	c.Abort()
}
