package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/desktop"
)

// e2bToOwner passes an E2B request about a sandbox another host of the
// fleet runs to that host: the control plane's calls on one sandbox
// (/sandboxes/ID..., /v2/sandboxes/ID/...) and every envd call
// (E2b-Sandbox-Id names its sandbox). The host that serves it checks the
// API key or the access token, which both derive from the daemon token a
// fleet shares. A create is placed as /v1's are, its template read as a
// snapshot through snapshotOf (nil: creates run here). A request with
// neither credential is served here, which refuses it, before it costs a
// read of the fleet's records. A list is served here, from the fleet's
// records (othersRunning).
func (s *Server) e2bToOwner(snapshotOf func(template string) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if s.cfg.Locate == nil || r.Header.Get(proxiedBy) != "" || (r.Header.Get("X-API-KEY") == "" && r.Header.Get("X-Access-Token") == "") {
			c.Next()
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/e2b")
		if r.Method == http.MethodPost && (path == "/sandboxes" || path == "/v2/sandboxes") {
			if s.cfg.Place != nil && snapshotOf != nil {
				s.placeE2B(c, snapshotOf)
				return
			}
			c.Next()
			return
		}
		if id := e2bSandbox(path, r.Header); id != "" {
			s.passToOwnerOf(c, id)
			return
		}
		c.Next()
	}
}

// othersRunning lists the desktops the fleet's other live hosts run (a
// lost host's are left out: their state is unknown); nil on a single
// host.
func (s *Server) othersRunning() func(context.Context) ([]desktop.Desktop, error) {
	if s.cfg.Others == nil {
		return nil
	}
	return func(ctx context.Context) ([]desktop.Desktop, error) {
		all, err := s.cfg.Others(ctx)
		if err != nil {
			return nil, err
		}
		var out []desktop.Desktop
		for _, o := range all {
			if !o.Lost {
				out = append(out, o.Desktop)
			}
		}
		return out, nil
	}
}

// e2bSandbox is the sandbox an E2B request (its path without /e2b) is
// about: envd's header, or the control plane's path; "" for none.
func e2bSandbox(path string, h http.Header) string {
	if id := h.Get("E2b-Sandbox-Id"); id != "" {
		return id
	}
	rest, ok := strings.CutPrefix(path, "/v2/sandboxes/")
	if !ok {
		rest, ok = strings.CutPrefix(path, "/sandboxes/")
	}
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// placeE2B chooses the host for an E2B create made to this host of a
// fleet, as place does for /v1's: the chosen host's answer is passed on,
// or the create runs here once the snapshot is here (pulled from the
// fleet when only another host holds it). Errors take E2B's shape, which
// the SDKs read.
func (s *Server) placeE2B(c *gin.Context, snapshotOf func(string) string) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxJSONBody))
	if err != nil {
		e2bAbort(c, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		TemplateID string `json:"templateID"`
	}
	if json.Unmarshal(body, &req) != nil {
		c.Next() // the front door says what is wrong
		return
	}
	snap := snapshotOf(req.TemplateID)
	here, release, err := s.placeOrPass(c, snap, "a sandbox of "+snap)
	if err != nil {
		status, _ := statusOf(err)
		e2bAbort(c, status, "place a sandbox of template "+req.TemplateID+": "+err.Error())
		return
	}
	if !here {
		return
	}
	defer release()
	if s.cfg.EnsureSnapshot != nil {
		if err := s.cfg.EnsureSnapshot(c.Request.Context(), snap); err != nil {
			status, _ := statusOf(err)
			e2bAbort(c, status, "bring snapshot "+snap+" of template "+req.TemplateID+" to this host: "+err.Error())
			return
		}
	}
	c.Next()
}

// isE2B says whether r came through the E2B front door, whose callers
// read errors in E2B's shape.
func isE2B(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/e2b/") }

// e2bAbort answers in E2B's error shape: the SDKs read the code from the
// body, not the status line.
func e2bAbort(c *gin.Context, status int, message string) {
	c.AbortWithStatusJSON(status, gin.H{"code": status, "message": message})
}
