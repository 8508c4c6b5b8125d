package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/devtools"
)

// DevTools over hostd: /v1/desktops/ID/cdp is the root of the desktop's
// Chromium debugging port, as Playwright's connectOverCDP, Puppeteer's
// connect and chromedp's remote allocator expect it: /json/version and
// /json/list with every WebSocket URL pointing back here, and the
// browser's and pages' WebSockets carried to Chromium through the guest's
// DevTools bridge (drive.Service.DialDevTools), never the guest's network.
//
// It needs the shell role: Chromium runs as root in the guest, so its
// DevTools read any file (file://) and run any script a shell could.
// For tools that cannot set a header, /v1/cdp/TOKEN is the same root with
// a per-desktop shell token in the path: short-lived (devtoolsURLTTL at
// most), never the daemon's, minted by POST /v1/desktops/ID/cdp/url.

// devtoolsURLTTL is the longest life left a token in a DevTools URL may
// have: URLs end up in logs and test reports.
const devtoolsURLTTL = 15 * time.Minute

func (s *Server) devtoolsRoutes(g *gin.RouterGroup) {
	byID := func(c *gin.Context) {
		s.devtoolsProxy(c, c.Param("id"), "/v1/desktops/"+c.Param("id")+"/cdp")
	}
	// GET for discovery and WebSockets; PUT for /json/new, which Chromium
	// takes only as PUT.
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		g.Handle(method, "/desktops/:id/cdp/*path", need(needShell), byID)
		// The path token is the credential: no s.auth.
		s.engine.Handle(method, "/v1/cdp/:token/*path", s.cdpToOwner, s.devtoolsByToken)
	}
	g.POST("/desktops/:id/cdp/url", need(needShell), s.devtoolsURL)
}

// devtoolsByToken serves /v1/cdp/TOKEN/...: the token is checked here.
func (s *Server) devtoolsByToken(c *gin.Context) {
	tok := c.Param("token")
	if s.validDaemonToken(tok) {
		abort(c, http.StatusForbidden, "forbidden", "the daemon's token never goes in a URL: mint a short-lived one with POST /v1/desktops/ID/cdp/url", "")
		return
	}
	g, ok := s.views.check(tok, "")
	if !ok {
		abort(c, http.StatusUnauthorized, "unauthorized", "the token in this DevTools URL is not valid (expired, revoked, or from before hostd restarted): mint another with POST /v1/desktops/ID/cdp/url", "")
		return
	}
	if roleLevel[g.role] < needShell {
		abort(c, http.StatusForbidden, "forbidden", fmt.Sprintf("this %s token cannot reach DevTools: it needs a %s token", g.role, RoleShell), "")
		return
	}
	if left := time.Until(g.expires); left > devtoolsURLTTL {
		abort(c, http.StatusForbidden, "forbidden", fmt.Sprintf("a token in a DevTools URL may live %s at most, this one %s more: mint one with POST /v1/desktops/%s/cdp/url", devtoolsURLTTL, left.Round(time.Minute), g.desktop), "")
		return
	}
	c.Set(grantKey, g)
	s.devtoolsProxy(c, g.desktop, "/v1/cdp/"+tok)
}

// devtoolsURL mints a short-lived DevTools URL for the desktop and
// returns it with the browser's WebSocket, for tools that take one URL.
func (s *Server) devtoolsURL(c *gin.Context) {
	id := c.Param("id")
	ttl := devtoolsURLTTL
	if g, ok := grantOf(c); ok {
		ttl = min(ttl, time.Until(g.expires).Truncate(time.Second))
	}
	if ttl < time.Second {
		abort(c, http.StatusForbidden, "forbidden", "this token expires too soon to mint a DevTools URL from", "")
		return
	}
	tok, exp := s.views.issue(id, RoleShell, ttl)
	base := "/v1/cdp/" + tok
	version, err := s.devtoolsGet(c.Request.Context(), id, "/json/version")
	if err != nil {
		fail(c, err)
		return
	}
	ws, err := devtools.RewriteDiscovery(version, socketBase(c.Request, base))
	if err != nil {
		fail(c, err)
		return
	}
	var doc struct {
		WebSocket string `json:"webSocketDebuggerUrl"`
	}
	if err := json.Unmarshal(ws, &doc); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, api.DevToolsURL{
		EndpointURL: httpBase(c.Request) + base,
		WebSocket:   doc.WebSocket,
		ExpiresAt:   exp,
	})
}

// devtoolsGet fetches one of Chromium's discovery documents.
func (s *Server) devtoolsGet(ctx context.Context, id, path string) ([]byte, error) {
	conn, err := s.cfg.Drive.DialDevTools(ctx, id)
	if err != nil {
		return nil, err
	}
	transport, release := oneConn(conn)
	defer release()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:9222"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: desktop %s: Chromium's DevTools: %w", desktop.ErrUnavailable, id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, devtools.MaxDiscovery))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: desktop %s: Chromium's DevTools answered %s %.200q (%v)", desktop.ErrUnavailable, id, resp.Status, body, err)
	}
	return body, nil
}

// pageWait bounds a request about the page Chromium shows: a Chromium
// that does not answer (hung, or a guest without the bridge) costs each
// Gemini call at most this, not devtoolsGet's 30 s. The first request
// after a restore opens the bridge's session, which takes a few seconds
// under TCG.
const pageWait = 5 * time.Second

// devtoolsTarget is one entry of Chromium's /json/list.
type devtoolsTarget struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	URL  string `json:"url"`
}

// activePage is the page Chromium shows: the first page of /json/list,
// which Chromium lists most recently active first. It is one discovery
// request over the desktop's open bridge session.
func (s *Server) activePage(ctx context.Context, id string) (devtoolsTarget, error) {
	ctx, cancel := context.WithTimeout(ctx, pageWait)
	defer cancel()
	body, err := s.devtoolsGet(ctx, id, "/json/list")
	if err != nil {
		return devtoolsTarget{}, err
	}
	var targets []devtoolsTarget
	if err := json.Unmarshal(body, &targets); err != nil {
		return devtoolsTarget{}, fmt.Errorf("%w: desktop %s: Chromium's page list: %w", desktop.ErrUnavailable, id, err)
	}
	for _, t := range targets {
		if t.Type == "page" {
			return t, nil
		}
	}
	return devtoolsTarget{}, fmt.Errorf("%w: desktop %s: Chromium shows no page (did it exit? a reset brings it back)", desktop.ErrUnavailable, id)
}

// pageURL is the URL of the page Chromium shows, or "" when it cannot be
// read.
func (s *Server) pageURL(ctx context.Context, id string) string {
	page, err := s.activePage(ctx, id)
	if err != nil {
		s.log.Warn("no page URL for a Gemini response", "desktop", id, "err", err)
	}
	return page.URL
}

// openPage has the page Chromium shows load target, as Google's reference
// client's navigate does (Playwright's page.goto): Page.navigate over the
// page's DevTools WebSocket, through the bridge, then a wait for the new
// page to commit (at most loadWait: a page still loading is pictured as
// it is). A navigation that fails shows Chromium's error page, which
// the screenshot and url tell. Typing into the address bar instead raced
// Chromium under TCG: ctrl+l reaches the address bar only after the
// renderer has declined it, and the URL's first keys went to the page
// meanwhile ("chrome://version" searched for "on"). Refused, like any
// input, while a person is in control.
func (s *Server) openPage(ctx context.Context, id, target string) error {
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		return err
	}
	if err := d.InputAllowed(); err != nil {
		return err
	}
	page, err := s.activePage(ctx, id)
	if err != nil {
		return err
	}
	conn, err := s.cfg.Drive.DialDevTools(ctx, id)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, navigateWait)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	failed := func(err error) error {
		return fmt.Errorf("%w: desktop %s: Chromium did not open %q: %w", desktop.ErrUnavailable, id, target, err)
	}
	// Chromium answers only a Host that is an address or localhost, and no
	// Origin it was not told to allow: gorilla sends none.
	u := &url.URL{Scheme: "ws", Host: "127.0.0.1:9222", Path: "/devtools/page/" + page.ID}
	ws, _, err := websocket.NewClient(conn, u, nil, 4096, 4096)
	if err != nil {
		return failed(err)
	}
	for i, m := range []string{"Page.enable", "Page.navigate"} {
		params := map[string]string{}
		if m == "Page.navigate" {
			params["url"] = target
		}
		if err := ws.WriteJSON(map[string]any{"id": i + 1, "method": m, "params": params}); err != nil {
			return failed(err)
		}
	}
	// The wait ends when the main frame commits the new page
	// (Page.frameNavigated): under TCG its load event came later than
	// loadWait, and the screenshot's settling waits for the painting.
	waiting, committed := false, false
	for {
		var m struct {
			ID     int    `json:"id"`
			Method string `json:"method"`
			Params struct {
				Frame struct {
					ParentID string `json:"parentId"`
				} `json:"frame"`
			} `json:"params"`
			Result struct {
				LoaderID  string `json:"loaderId"`
				ErrorText string `json:"errorText"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			if waiting {
				return nil // still loading at loadWait: pictured as it is
			}
			return failed(err)
		}
		switch {
		case m.Error != nil:
			return failed(errors.New(m.Error.Message))
		case m.ID == 2 && (m.Result.ErrorText != "" || m.Result.LoaderID == ""):
			// Chromium's error page, or a same-document navigation: no
			// load event to wait for.
			return nil
		case m.ID == 2 && committed:
			return nil
		case m.ID == 2:
			waiting = true
			conn.SetReadDeadline(time.Now().Add(loadWait))
		case m.Method == "Page.frameNavigated" && m.Params.Frame.ParentID == "":
			if waiting {
				return nil
			}
			committed = true
		case waiting && m.Method == "Page.loadEventFired":
			return nil
		}
	}
}

// navigateWait bounds a navigation's start; loadWait the wait for its
// page's commit after.
const (
	navigateWait = 30 * time.Second
	loadWait     = 10 * time.Second
)

// devtoolsProxy carries one request under a DevTools root (base, the
// public path the client used) to Chromium.
func (s *Server) devtoolsProxy(c *gin.Context, id, base string) {
	path := "/" + strings.TrimPrefix(c.Param("path"), "/")
	conn, err := s.cfg.Drive.DialDevTools(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	if strings.EqualFold(c.Request.Header.Get("Upgrade"), "websocket") {
		conn = devtools.WithCloseReason(conn, s.devtoolsEndReason(id))
		s.cfg.Manager.Events().Announce(id, desktop.EventDevTools, "a DevTools client connected to "+path)
		defer s.cfg.Manager.Events().Announce(id, desktop.EventDevTools, "a DevTools client disconnected from "+path)
	}
	transport, release := oneConn(conn)
	defer release()
	discovery := path == "/json" || strings.HasPrefix(path, "/json/")
	sockets := socketBase(c.Request, base)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1:9222"})
			r.Out.URL.Path, r.Out.URL.RawPath = path, ""
			// Chromium answers only a Host that is an address or
			// localhost, and refuses a WebSocket with an Origin it was not
			// told to allow; neither means anything through hostd.
			r.Out.Host = "127.0.0.1:9222"
			r.Out.Header.Del("Origin")
			r.Out.Header.Del("Authorization")
			r.Out.Header.Del("Cookie")
			stripBearerProtocol(r.Out.Header)
			if discovery {
				r.Out.Header.Del("Accept-Encoding") // rewritten below: plain text
			}
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			// /json/activate and /json/close answer plain text, and
			// /json/protocol (large) holds no sockets.
			isJSON := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
			if !discovery || !isJSON || resp.StatusCode != http.StatusOK || path == "/json/protocol" {
				return nil
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, devtools.MaxDiscovery))
			resp.Body.Close()
			if err != nil {
				return err
			}
			out, err := devtools.RewriteDiscovery(body, sockets)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(out))
			resp.ContentLength = int64(len(out))
			resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			abort(c, http.StatusServiceUnavailable, "unavailable", "desktop "+id+": Chromium's DevTools: "+err.Error()+" (if Chromium crashed, a reset brings it back: POST /v1/desktops/"+id+"/reset)", "")
		},
	}
	proxy.ServeHTTP(c.Writer, c.Request)
}

// devtoolsEndReason returns what a DevTools WebSocket's client is told when
// the connection, opened now, ends from the desktop's side.
func (s *Server) devtoolsEndReason(id string) func() string {
	d, _ := s.cfg.Manager.Get(id)
	resets := d.Resets
	return func() string {
		now, err := s.cfg.Manager.Get(id)
		switch {
		case err != nil:
			return "warmdesk: desktop " + id + " was deleted"
		case now.Resets != resets:
			return "warmdesk: desktop " + id + " was reset to its snapshot: connect again"
		case now.State != desktop.StateRunning:
			return "warmdesk: desktop " + id + " is " + string(now.State)
		default:
			return "warmdesk: Chromium in desktop " + id + " closed DevTools (did Chromium exit? a reset brings it back)"
		}
	}
}

// oneConn is a transport that uses conn for its one request; release
// closes conn if the request never took it.
func oneConn(conn net.Conn) (*http.Transport, func()) {
	first := make(chan net.Conn, 1)
	first <- conn
	t := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			select {
			case c := <-first:
				return c, nil
			default:
				return nil, fmt.Errorf("devtools: one connection per request")
			}
		},
	}
	return t, func() {
		select {
		case c := <-first:
			c.Close()
		default:
		}
	}
}

// socketBase is the ws:// or wss:// URL of a DevTools root on this server,
// as the client reached it.
func socketBase(r *http.Request, path string) *url.URL {
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	return &url.URL{Scheme: scheme, Host: r.Host, Path: path}
}

// httpBase is this server's http:// or https:// origin as the client
// reached it.
func httpBase(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}
