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
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
)

// Roles of a per-desktop token; they nest (see access).
const (
	RoleView    = "view"    // watch: screenshots, view-only VNC, events
	RoleControl = "control" // watch and drive: input, VNC with input, pasting
	RoleShell   = "shell"   // and act inside the guest: exec, files, the clipboard
)

// grant is what a per-desktop token allows.
type grant struct {
	desktop string
	role    string
	expires time.Time
	sig     string // the token's signature: which token it is, for per-token caps
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
// the server starts (so they die with the process and need no cleanup)
// and the desktop's generation, which revoke advances: every token issued
// for the desktop before then stops working, and no other desktop's.
type viewTokens struct {
	key []byte
	now func() time.Time

	mu      sync.Mutex
	gens    map[string]uint64
	revoked map[string]chan struct{} // closed by revoke, for open sockets
	// moved are the keys of desktops that moved here from another host,
	// which signed their tokens (adopt).
	moved map[string][]byte
}

func newViewTokens() *viewTokens {
	key := make([]byte, 32)
	rand.Read(key)
	return &viewTokens{key: key, now: time.Now, gens: map[string]uint64{}, revoked: map[string]chan struct{}{}, moved: map[string][]byte{}}
}

// desktopKey is the key a desktop's tokens are signed with: one of its
// own, derived from the server's, so a move can hand it to the desktop's
// next host without handing over any other desktop's.
func (v *viewTokens) desktopKey(desktop string) []byte {
	v.mu.Lock()
	k, ok := v.moved[desktop]
	v.mu.Unlock()
	if ok {
		return k
	}
	h := hmac.New(sha256.New, v.key)
	h.Write([]byte("desktop." + desktop))
	return h.Sum(nil)
}

// movedTokens is what a desktop's tokens need on the host it moves to.
type movedTokens struct {
	Key        []byte `json:"key"`
	Generation uint64 `json:"generation"`
}

// export is what the tokens of a desktop moving away need.
func (v *viewTokens) export(desktop string) movedTokens {
	return movedTokens{Key: v.desktopKey(desktop), Generation: v.generation(desktop)}
}

// adopt takes the tokens of a desktop that moved here: those its last
// host issued stay good, and those revoked there stay revoked.
func (v *viewTokens) adopt(desktop string, t movedTokens) {
	if len(t.Key) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.moved[desktop] = t.Key
	v.gens[desktop] = max(v.gens[desktop], t.Generation)
}

// revoke ends every token issued so far for a desktop, and the sockets
// they opened.
func (v *viewTokens) revoke(desktop string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gens[desktop]++
	if ch, ok := v.revoked[desktop]; ok {
		close(ch)
		delete(v.revoked, desktop)
	}
}

// revocation is closed when the desktop's tokens issued so far are revoked.
func (v *viewTokens) revocation(desktop string) <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	ch, ok := v.revoked[desktop]
	if !ok {
		ch = make(chan struct{})
		v.revoked[desktop] = ch
	}
	return ch
}

func (v *viewTokens) generation(desktop string) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gens[desktop]
}

// MaxTokenTTL bounds a per-desktop token's life.
const MaxTokenTTL = 24 * time.Hour

func (v *viewTokens) issue(desktop, role string, ttl time.Duration) (string, time.Time) {
	exp := v.now().Add(ttl).Truncate(time.Second)
	payload := "wdt1." + desktop + "." + role + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + v.mac(desktop, payload, v.generation(desktop)), exp
}

func (v *viewTokens) mac(desktop, payload string, gen uint64) string {
	h := hmac.New(sha256.New, v.desktopKey(desktop))
	h.Write([]byte(payload))
	h.Write([]byte("." + strconv.FormatUint(gen, 10)))
	return hex.EncodeToString(h.Sum(nil))
}

// check verifies a token for a desktop (any desktop when id is empty).
func (v *viewTokens) check(tok, id string) (grant, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != "wdt1" {
		return grant{}, false
	}
	payload := strings.Join(parts[:4], ".")
	if !hmac.Equal([]byte(parts[4]), []byte(v.mac(parts[1], payload, v.generation(parts[1])))) {
		return grant{}, false
	}
	unix, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || !v.now().Before(time.Unix(unix, 0)) {
		return grant{}, false
	}
	if id != "" && parts[1] != id {
		return grant{}, false
	}
	if _, ok := roleLevel[parts[2]]; !ok {
		return grant{}, false
	}
	return grant{desktop: parts[1], role: parts[2], expires: time.Unix(unix, 0), sig: parts[4]}, true
}

func (s *Server) issueToken(c *gin.Context) {
	id := c.Param("id")
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	req := api.IssueToken{Role: RoleView}
	if !decodeJSON(c, &req) {
		return
	}
	if _, ok := roleLevel[req.Role]; !ok {
		badRequest(c, "role", fmt.Sprintf("role %q: use %s (watch), %s (watch and drive) or %s (also exec, files and the clipboard)", req.Role, RoleView, RoleControl, RoleShell))
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

// revokeTokens ends every per-desktop token issued so far for the desktop
// (a share link handed to the wrong person), without a restart.
func (s *Server) revokeTokens(c *gin.Context) {
	id := c.Param("id")
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	s.views.revoke(id)
	c.Status(http.StatusNoContent)
}

// endOnRevoke calls end when the per-desktop token of a long-lived request
// (a WebSocket, an event stream) is revoked; the daemon's token is never.
// The returned function stops watching.
func (s *Server) endOnRevoke(c *gin.Context, end func()) (stop func()) {
	g, ok := grantOf(c)
	if !ok {
		return func() {}
	}
	revoked, done := s.views.revocation(g.desktop), make(chan struct{})
	go func() {
		select {
		case <-revoked:
			end()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// SetToken makes tok the daemon's token from the next request on: a
// fleet's hosts take the token another host rotated to.
func (s *Server) SetToken(tok string) {
	s.rotating.Lock()
	defer s.rotating.Unlock()
	if s.daemonToken() != tok {
		s.token.Store(&tok)
		s.log.Warn("the daemon's API token changed (rotated on another host of the fleet); the old one no longer works")
	}
}

// rotateToken replaces the daemon's token: the old one is refused from
// the next request on; per-desktop tokens are signed apart and stay.
func (s *Server) rotateToken(c *gin.Context) {
	if s.cfg.RotateToken == nil {
		abort(c, http.StatusNotImplemented, "not_implemented", "this server cannot rotate its token", "")
		return
	}
	// One rotation at a time: the token kept in the file and the one this
	// server checks must be the same.
	s.rotating.Lock()
	tok, err := s.cfg.RotateToken()
	if err == nil {
		s.token.Store(&tok)
	}
	s.rotating.Unlock()
	if err != nil {
		fail(c, fmt.Errorf("rotate the daemon's token: %w", err))
		return
	}
	s.log.Warn("the daemon's API token was rotated; the old one no longer works")
	c.JSON(http.StatusOK, api.RotatedToken{Token: tok})
}
