package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/agentmcp"
	"github.com/warmdesk/warmdesk/client"
)

// mcpRoutes serves warmdesk's MCP server over streamable HTTP at /mcp.
// Each MCP session gets a server of its own (its bound desktop), and its
// tools call this server's own API in process, with the caller's token:
// the access checks, errors and input path are the API's.
//
// The daemon's token is required: per-desktop tokens are checked against
// the desktop in a route's path, which /mcp has none of. ?display=WxH sets
// the size screenshots come back at (the computer tool's coordinate
// space); ?snapshot=NAME what create_desktop starts from.
func (s *Server) mcpRoutes(e *gin.Engine) {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		opts, err := mcpOptions(r)
		if err != nil {
			return nil // answered 400 by the handler
		}
		opts.Client = s.inProcessClient
		return agentmcp.NewServer(opts)
	}, &mcp.StreamableHTTPOptions{Logger: s.log})
	serve := func(c *gin.Context) {
		tok, ok := bearer(c.Request)
		if ok && !s.validDaemonToken(tok) {
			if _, desktopToken := s.views.check(tok, ""); desktopToken {
				abort(c, http.StatusForbidden, "forbidden", "/mcp needs the daemon's token: a desktop's token reaches only that desktop's routes", "")
				return
			}
		}
		if !ok || !s.validDaemonToken(tok) {
			c.Header("WWW-Authenticate", `Bearer realm="warmdesk"`)
			abort(c, http.StatusUnauthorized, "unauthorized", "/mcp needs the daemon's token (Authorization: Bearer TOKEN)", "")
			return
		}
		if _, err := mcpOptions(c.Request); err != nil {
			badRequest(c, "display", err.Error())
			return
		}
		h.ServeHTTP(c.Writer, c.Request)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		e.Handle(m, "/mcp", serve)
	}
}

// mcpOptions reads /mcp's query.
func mcpOptions(r *http.Request) (agentmcp.Options, error) {
	var o agentmcp.Options
	o.DefaultSnapshot = r.URL.Query().Get("snapshot")
	if v := r.URL.Query().Get("display"); v != "" {
		ws, hs, ok := strings.Cut(v, "x")
		w, err1 := strconv.Atoi(ws)
		h, err2 := strconv.Atoi(hs)
		if !ok || err1 != nil || err2 != nil || w < 64 || h < 64 || w > 7680 || h > 4320 {
			return o, fmt.Errorf("display %q: write WIDTHxHEIGHT, like 1280x800", v)
		}
		o.DisplayWidth, o.DisplayHeight = w, h
	}
	return o, nil
}

// inProcessClient is an API client for a tool call that sends its
// requests straight to this server's handler, with the caller's token.
func (s *Server) inProcessClient(req *mcp.CallToolRequest) (*client.Client, error) {
	if req.Extra == nil || req.Extra.Header == nil {
		return nil, errors.New("no HTTP request behind this call")
	}
	tok, ok := bearer(&http.Request{Header: req.Extra.Header})
	if !ok {
		return nil, errors.New("no bearer token on this call")
	}
	c := client.New("http://hostd.in-process", tok)
	c.HTTP = &http.Client{Transport: handlerTransport{s.engine}}
	return c, nil
}

// handlerTransport answers requests by calling a handler in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
