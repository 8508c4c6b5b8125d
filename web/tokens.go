package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
)

// Roles of a per-desktop token.
const (
	RoleView    = "view"    // watch: screenshots, view-only VNC, events
	RoleControl = "control" // watch and drive: input, VNC with input
)

// grant is what a per-desktop token allows.
type grant struct {
	desktop string
	role    string
	expires time.Time
}

const grantKey = "warmdesk.grant"

func grantOf(c *gin.Context) (grant, bool) {
	v, ok := c.Get(grantKey)
	if !ok {
		return grant{}, false
	}
	g, ok := v.(grant)
	return g, ok
}

// viewTokens issues and checks per-desktop tokens. They are signed, not
// stored: "wdt1.DESKTOP.ROLE.EXPIRY.MAC", with an HMAC under a key made when
// the server starts, so they die with the process and need no cleanup.
type viewTokens struct {
	key []byte
	now func() time.Time
}

func newViewTokens() *viewTokens {
	key := make([]byte, 32)
	rand.Read(key)
	return &viewTokens{key: key, now: time.Now}
}

// MaxTokenTTL bounds a per-desktop token's life.
const MaxTokenTTL = 24 * time.Hour

func (v *viewTokens) issue(desktop, role string, ttl time.Duration) (string, time.Time) {
	exp := v.now().Add(ttl).Truncate(time.Second)
	payload := "wdt1." + desktop + "." + role + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + v.mac(payload), exp
}

func (v *viewTokens) mac(payload string) string {
	h := hmac.New(sha256.New, v.key)
	h.Write([]byte(payload))
	return hex.EncodeToString(h.Sum(nil))
}

// check verifies a token for a desktop (any desktop when id is empty).
func (v *viewTokens) check(tok, id string) (grant, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != "wdt1" {
		return grant{}, false
	}
	payload := strings.Join(parts[:4], ".")
	if !hmac.Equal([]byte(parts[4]), []byte(v.mac(payload))) {
		return grant{}, false
	}
	unix, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || !v.now().Before(time.Unix(unix, 0)) {
		return grant{}, false
	}
	if id != "" && parts[1] != id {
		return grant{}, false
	}
	if parts[2] != RoleView && parts[2] != RoleControl {
		return grant{}, false
	}
	return grant{desktop: parts[1], role: parts[2], expires: time.Unix(unix, 0)}, true
}

// daemonOnly refuses requests authorised by a per-desktop token.
func (s *Server) daemonOnly(c *gin.Context) bool {
	if _, ok := grantOf(c); ok {
		abort(c, http.StatusForbidden, "forbidden", "this needs the daemon's token; a per-desktop token only watches or drives its desktop", "")
		return false
	}
	return true
}

// mayControl reports whether the request may send input.
func mayControl(c *gin.Context) bool {
	g, ok := grantOf(c)
	return !ok || g.role == RoleControl
}

func (s *Server) issueToken(c *gin.Context) {
	if !s.daemonOnly(c) {
		return
	}
	id := c.Param("id")
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	req := api.IssueToken{Role: RoleView}
	if !decodeJSON(c, &req) {
		return
	}
	if req.Role != RoleView && req.Role != RoleControl {
		badRequest(c, "role", fmt.Sprintf("role %q: use %s or %s", req.Role, RoleView, RoleControl))
		return
	}
	ttl := time.Duration(req.TTL)
	if ttl == 0 {
		ttl = time.Hour
	}
	if ttl < time.Minute || ttl > MaxTokenTTL {
		badRequest(c, "ttl", fmt.Sprintf("ttl %s: use 1m to %s", ttl, MaxTokenTTL))
		return
	}
	tok, exp := s.views.issue(id, req.Role, ttl)
	c.JSON(http.StatusCreated, api.IssuedToken{Token: tok, Role: req.Role, ExpiresAt: exp, ViewerURL: "/desktops/" + id + "#token=" + tok})
}
