package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/netpolicy"
)

func (s *Server) networkRoutes(g *gin.RouterGroup) {
	g.GET("/desktops/:id/network", need(needView), s.getNetwork)
	g.PUT("/desktops/:id/network", need(needDaemon), s.putNetwork)
	g.Any("/desktops/:id/ports/:port", need(needControl), s.portProxy)
	g.Any("/desktops/:id/ports/:port/*path", need(needControl), s.portProxy)
}

func (s *Server) getNetwork(c *gin.Context) {
	d, err := s.cfg.Manager.Get(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d.Network)
}

// putNetwork replaces the egress policy; the guest's next connection is
// decided by it. Only the daemon's token may widen what a guest reaches.
func (s *Server) putNetwork(c *gin.Context) {
	var p netpolicy.Policy
	if !decodeJSON(c, &p) {
		return
	}
	d, err := s.cfg.Manager.SetNetwork(c.Param("id"), p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d.Network)
}

// wirePolicy is an egress policy in the API's wire type: the same JSON.
func wirePolicy(p netpolicy.Policy) api.NetworkPolicy {
	return api.NetworkPolicy{Mode: string(p.Mode), Allow: p.Allow}
}

// domainPolicy is a policy from the wire, for the Manager to check.
func domainPolicy(p api.NetworkPolicy) netpolicy.Policy {
	return netpolicy.Policy{Mode: netpolicy.Mode(p.Mode), Allow: p.Allow}
}

// portProxy carries HTTP and WebSocket requests to a TCP port inside the
// guest: /v1/desktops/ID/ports/3000/x reaches the guest's
// http://localhost:3000/x. hostd's credentials are not passed on.
func (s *Server) portProxy(c *gin.Context) {
	id := c.Param("id")
	port, err := strconv.Atoi(c.Param("port"))
	if err != nil {
		badRequest(c, "port", "port "+strconv.Quote(c.Param("port"))+": use a number from 1 to 65535")
		return
	}
	conn, err := s.cfg.Drive.DialPort(c.Request.Context(), id, port)
	if errors.Is(err, drive.ErrNothingListens) {
		abort(c, http.StatusBadGateway, "bad_gateway", err.Error(), "")
		return
	}
	if err != nil {
		fail(c, err)
		return
	}
	// The first connection is dialled above, so its errors are the API's;
	// the proxy's transport takes it, or dials again if it needs another.
	first := make(chan net.Conn, 1)
	first <- conn
	defer func() {
		select {
		case c := <-first:
			c.Close()
		default:
		}
	}()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		select {
		case c := <-first:
			return c, nil
		default:
			return s.cfg.Drive.DialPort(ctx, id, port)
		}
	}
	target := &url.URL{Scheme: "http", Host: "localhost:" + strconv.Itoa(port)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = "/" + strings.TrimPrefix(c.Param("path"), "/")
			r.Out.URL.RawPath = ""
			r.Out.Host = target.Host
			r.Out.Header.Del("Authorization")
			stripBearerProtocol(r.Out.Header)
		},
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		// The guest's pages are served on hostd's origin: a sandbox gives
		// them an opaque origin (no access to the viewer's stored token),
		// and they set no cookies on hostd's.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("Content-Security-Policy", "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")
			resp.Header.Del("Set-Cookie")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			abort(c, http.StatusBadGateway, "bad_gateway", "port "+strconv.Itoa(port)+" of desktop "+id+": "+err.Error(), "")
		},
	}
	proxy.ServeHTTP(c.Writer, c.Request)
}

// stripBearerProtocol drops the "bearer.TOKEN" WebSocket subprotocol a
// browser uses to authenticate to hostd, so the guest never sees it.
func stripBearerProtocol(h http.Header) {
	var keep []string
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, "bearer.") {
				keep = append(keep, p)
			}
		}
	}
	h.Del("Sec-WebSocket-Protocol")
	if len(keep) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(keep, ", "))
	}
}
