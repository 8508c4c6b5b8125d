package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/agentmcp"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/input"
)

// mcpRoutes serves warmdesk's MCP server over streamable HTTP at /mcp.
// Each MCP session gets a server of its own (its bound desktop), and its
// tools call this server's own API in process, with the caller's token:
// the access checks, errors and input path are the API's.
//
// The daemon's token opens a session over the whole host. A desktop's
// control or shell token opens one fixed to that desktop, offered the
// tools its role reaches (agentmcp.Reach): an agent handed a share link
// gets that one desktop and no more. ?display=WxH sets the size screenshots come back
// at (the computer tool's coordinate space); ?snapshot=NAME what
// create_desktop starts from.
func (s *Server) mcpRoutes(e *gin.Engine) {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		opts, err := mcpOptions(r)
		if err != nil {
			return nil // answered 400 by the handler
		}
		if g, ok := s.mcpGrant(r); ok {
			opts.Desktop, opts.Reach = g.desktop, mcpReach[g.role]
		}
		opts.Client = s.inProcessClient
		return agentmcp.NewServer(opts)
	}, &mcp.StreamableHTTPOptions{Logger: s.log, SessionTimeout: mcpSessionTimeout})
	serve := func(c *gin.Context) {
		tok, ok := bearer(c.Request)
		if !ok || !s.validDaemonToken(tok) {
			g, desktopToken := s.mcpGrant(c.Request)
			if !desktopToken {
				c.Header("WWW-Authenticate", `Bearer realm="warmdesk"`)
				abort(c, http.StatusUnauthorized, "unauthorized", "/mcp needs the daemon's token or a desktop's control or shell token (Authorization: Bearer TOKEN)", "")
				return
			}
			if _, ok := mcpReach[g.role]; !ok {
				abort(c, http.StatusForbidden, "forbidden", fmt.Sprintf("this %s token cannot open /mcp: its tools drive the desktop, which needs a %s or %s token", g.role, RoleControl, RoleShell), "")
				return
			}
		}
		if _, err := mcpOptions(c.Request); err != nil {
			badRequest(c, "display", err.Error())
			return
		}
		if c.Request.Method == http.MethodPost && !mcpText(c) {
			return
		}
		h.ServeHTTP(c.Writer, c.Request)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		e.Handle(m, "/mcp", serve)
	}
}

// mcpText checks a message's strings as readBody does: the SDK's decoder
// would turn text that is not UTF-8 into U+FFFD, and the tool type it. A
// request with broken text is answered as JSON-RPC's invalid params,
// naming the field ("params.arguments.text"); a body over the SDK's own
// limit is 413, as on every route. Otherwise the body is put back for
// the SDK.
func mcpText(c *gin.Context) bool {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			tooLarge(c, mb.Limit)
		} else {
			badRequest(c, "", fmt.Sprintf("request body: %v", err))
		}
		return false
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	terr := input.CheckText(body)
	if terr == nil {
		return true
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		failWith(c, terr) // a notification: no id to answer
		return false
	}
	c.JSON(http.StatusOK, map[string]any{
		"jsonrpc": "2.0", "id": msg.ID,
		"error": map[string]any{"code": -32602, "message": "invalid params: " + terr.Error()},
	})
	c.Abort()
	return false
}

// mcpGrant is the grant of a request's per-desktop token; false for the
// daemon's token, none, or one that is not valid.
func (s *Server) mcpGrant(r *http.Request) (grant, bool) {
	tok, ok := bearer(r)
	if !ok || s.validDaemonToken(tok) {
		return grant{}, false
	}
	return s.views.check(tok, "")
}

// mcpReach maps hostd's roles to the MCP tools' reach; a view token has
// none.
var mcpReach = map[string]agentmcp.Reach{
	RoleControl: agentmcp.ReachControl,
	RoleShell:   agentmcp.ReachShell,
}

// mcpSessionTimeout ends an MCP session nobody used for this long: a
// client that crashed never says goodbye.
const mcpSessionTimeout = 30 * time.Minute

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

// handlerTransport answers requests by calling a handler in process. The
// answer streams through a pipe, so a reader that stops early (read_file
// past its limit) stops the handler too, and nothing is held whole.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer r.Body.Close()
		defer pw.Close()
		t.h.ServeHTTP(w, r)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: pr, ContentLength: -1, Request: r,
	}, nil
}

// pipeResponse is an http.ResponseWriter whose body goes into a pipe; the
// status and headers are ready once the handler writes its header.
type pipeResponse struct {
	header http.Header // the handler's
	sent   http.Header // as they were at WriteHeader
	body   *io.PipeWriter
	status int
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush is a no-op: every write reaches the reader at once.
func (w *pipeResponse) Flush() {}
