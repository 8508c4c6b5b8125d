package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
)

// routeAccess is what every route should ask of a token, written down
// apart from the routes' own declarations: a route added without an entry
// here fails TestEveryRouteAgainstEveryRole, and a route whose declared
// level drifts from this table fails it too. public: no token at all.
const public access = 0

var routeAccess = map[string]access{
	"GET /healthz":                                 public,
	"GET /":                                        public,
	"GET /desktops/:id":                            public, // the viewer page; it holds no data
	"GET /static/*file":                            public,
	"GET /metrics":                                 needDaemon,
	"GET /mcp":                                     needControl, // a desktop's token opens a session fixed to its desktop
	"POST /mcp":                                    needControl,
	"DELETE /mcp":                                  needControl,
	"GET /v1/desktops":                             needView,
	"POST /v1/desktops":                            needDaemon,
	"GET /v1/desktops/:id":                         needView,
	"DELETE /v1/desktops/:id":                      needDaemon,
	"POST /v1/desktops/:id/pause":                  needDaemon,
	"POST /v1/desktops/:id/resume":                 needDaemon,
	"POST /v1/desktops/:id/hibernate":              needDaemon,
	"POST /v1/desktops/:id/wake":                   needDaemon,
	"POST /v1/desktops/:id/fork":                   needDaemon,
	"POST /v1/desktops/:id/reset":                  needControl,
	"POST /v1/desktops/:id/recordings":             needControl,
	"GET /v1/desktops/:id/recordings":              needView,
	"GET /v1/desktops/:id/recordings/:rid":         needView,
	"GET /v1/desktops/:id/recordings/:rid/info":    needView,
	"GET /v1/desktops/:id/recordings/:rid/actions": needView,
	"POST /v1/desktops/:id/recordings/:rid/stop":   needControl,
	"DELETE /v1/desktops/:id/recordings/:rid":      needControl,
	"POST /v1/desktops/:id/snapshot":               needDaemon,
	"GET /v1/desktops/:id/screenshot":              needView,
	"GET /v1/desktops/:id/screenshot/settled":      needView,
	"GET /v1/desktops/:id/vnc":                     needView,
	"POST /v1/desktops/:id/vnc/tcp":                needDaemon,
	"DELETE /v1/desktops/:id/vnc/tcp":              needDaemon,
	"GET /v1/images":                               needDaemon,
	"GET /v1/snapshots":                            needDaemon,
	"GET /v1/snapshots/:name":                      needDaemon,
	"DELETE /v1/snapshots/:name":                   needDaemon,
	"GET /v1/events":                               needView,
	"POST /v1/token/rotate":                        needDaemon,
	"GET /v1/fleet":                                needDaemon,
	"GET /v1/fleet/snapshots/:name/:file":          needDaemon,
	"POST /v1/fleet/moves":                         needDaemon,
	"POST /v1/desktops/:id/move":                   needDaemon,
	"GET /v1/fleet/members":                        needDaemon,
	"POST /v1/fleet/members":                       needDaemon,
	"DELETE /v1/fleet/members/:name":               needDaemon,
	"POST /v1/fleet/hosts/:name/drain":             needDaemon,
	"DELETE /v1/fleet/hosts/:name/drain":           needDaemon,
	"POST /v1/desktops/:id/control":                needControl,
	"POST /v1/desktops/:id/tokens":                 needDaemon,
	"DELETE /v1/desktops/:id/tokens":               needDaemon,
	"POST /v1/desktops/:id/actions":                needControl,
	"POST /v1/desktops/:id/computer/anthropic":     needControl,
	// The browser toolset refuses schemes other than http and https: what it
	// reaches, keys typed into the address bar reach too.
	"POST /v1/desktops/:id/browser/anthropic":   needControl,
	"POST /v1/desktops/:id/computer/gemini":     needControl,
	"POST /v1/desktops/:id/computer/openai":     needControl,
	"GET /v1/host":                              needDaemon,
	"GET /v1/desktops/:id/control":              needControl,
	"POST /v1/desktops/:id/exec":                needShell,
	"GET /v1/desktops/:id/files":                needShell,
	"PUT /v1/desktops/:id/files":                needShell,
	"GET /v1/desktops/:id/clipboard":            needShell,
	"PUT /v1/desktops/:id/clipboard":            needControl,
	"GET /v1/desktops/:id/windows":              needControl,
	"POST /v1/desktops/:id/windows/:window/:op": needControl,
	"GET /v1/desktops/:id/accessibility":        needControl,
	"GET /v1/desktops/:id/network":              needView,
	"PUT /v1/desktops/:id/network":              needDaemon,
	// Volumes hold every desktop's workspace: the host's business.
	"GET /v1/volumes":                       needDaemon,
	"POST /v1/volumes":                      needDaemon,
	"GET /v1/volumes/:name":                 needDaemon,
	"DELETE /v1/volumes/:name":              needDaemon,
	"POST /v1/volumes/:name/snapshot":       needDaemon,
	"GET /v1/volumes/:name/archive":         needDaemon,
	"PUT /v1/volumes/:name/archive":         needDaemon,
	"POST /v1/desktops/:id/volumes":         needDaemon,
	"DELETE /v1/desktops/:id/volumes/:name": needDaemon,
	// The port proxy takes every method.
	"GET /v1/desktops/:id/cdp/*path": needShell,
	"PUT /v1/desktops/:id/cdp/*path": needShell,
	"POST /v1/desktops/:id/cdp/url":  needShell,
	// The token is in the path (the test puts a shell token there).
	"GET /v1/cdp/:token/*path":             public,
	"PUT /v1/cdp/:token/*path":             public,
	"* /v1/desktops/:id/ports/:port":       needControl,
	"* /v1/desktops/:id/ports/:port/*path": needControl,
}

func expectedAccess(method, path string) (access, bool) {
	if a, ok := routeAccess[method+" "+path]; ok {
		return a, true
	}
	a, ok := routeAccess["* "+path]
	return a, ok
}

// TestEveryRouteAgainstEveryRole sends each route's request with no token,
// each per-desktop role, another desktop's shell token and the daemon's
// token, and checks each answer's status against routeAccess: refused
// (401 without a valid token for the desktop, 403 for too small a role)
// exactly where the table says.
func TestEveryRouteAgainstEveryRole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens, KeyReaction: 20 * time.Millisecond})
	const daemon = "wd_access_test"
	s := New(Config{Manager: f.Manager, Drive: svc, Token: daemon})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)

	routes := s.engine.Routes()
	slices.SortStableFunc(routes, func(a, b gin.RouteInfo) int {
		// Destructive routes last, so the desktop is there for the others.
		return strings.Compare(fmt.Sprint(a.Method == "DELETE"), fmt.Sprint(b.Method == "DELETE"))
	})
	seen := map[string]bool{}
	for _, r := range routes {
		if _, ok := expectedAccess(r.Method, r.Path); !ok {
			t.Errorf("route %s %s has no entry in routeAccess: say which token it needs", r.Method, r.Path)
		}
		seen[r.Method+" "+r.Path] = true
	}
	for key := range routeAccess {
		method, path, _ := strings.Cut(key, " ")
		if method != "*" && !seen[key] {
			t.Errorf("routeAccess names %s %s, which the server no longer has", method, path)
		}
	}

	ttl := time.Hour
	type caller struct {
		name  string
		token string
		level access // how far it reaches on the desktop's routes
		other bool   // a token for another desktop
	}
	callers := []caller{{name: "no token", level: -1}}
	for _, role := range []string{RoleView, RoleControl, RoleShell} {
		tok, _ := s.views.issue(f.ID, role, ttl)
		callers = append(callers, caller{name: role, token: tok, level: roleLevel[role]})
	}
	other, _ := s.views.issue("d-someoneelse", RoleShell, ttl)
	callers = append(callers, caller{name: "another desktop's shell", token: other, level: needShell, other: true})
	callers = append(callers, caller{name: "daemon", token: daemon, level: needDaemon})

	client := &http.Client{Timeout: 10 * time.Second}
	urlToken, _ := s.views.issue(f.ID, RoleShell, devtoolsURLTTL)

	for _, c := range callers {
		for _, r := range routes {
			want, _ := expectedAccess(r.Method, r.Path)
			path := strings.NewReplacer(":id", f.ID, ":name", "golden", ":port", "3000", "*path", "x", "*file", "app.css", ":token", urlToken, ":file", "state").Replace(r.Path)
			req, err := http.NewRequest(r.Method, hs.URL+path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s %s as %s: %v", r.Method, path, c.name, err)
				continue
			}
			resp.Body.Close() // unread: the event stream would not end
			got := resp.StatusCode
			onDesktop := strings.Contains(r.Path, ":id")
			var refused int
			switch {
			case want == public:
			case c.level < 0:
				refused = http.StatusUnauthorized
			case c.other && onDesktop:
				refused = http.StatusUnauthorized // not a token for this desktop at all
			case c.level < want:
				refused = http.StatusForbidden
			}
			switch {
			case refused != 0 && got != refused:
				t.Errorf("%s %s as %s: %d, want %d", r.Method, r.Path, c.name, got, refused)
			case refused == 0 && (got == http.StatusUnauthorized || got == http.StatusForbidden):
				t.Errorf("%s %s as %s: refused with %d, want it let through", r.Method, r.Path, c.name, got)
			}
		}
	}
}
