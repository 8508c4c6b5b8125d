package web

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
)

// access is what a route asks of the request's token. The daemon's token
// passes every level; a per-desktop token passes the levels its role
// reaches, on its own desktop only (s.auth checks the desktop).
type access int

const (
	needView    access = iota + 1 // watch: the desktop's record, screenshots, view-only VNC, events
	needControl                   // drive: input, control, the clipboard's write, guest ports
	needShell                     // act inside the guest: exec, files, reading the clipboard
	needDaemon                    // the host: create, delete, snapshots, network policy, tokens, metrics
)

// roleLevel is how far each per-desktop role reaches. The roles nest: a
// shell token also drives and watches, a control token also watches.
var roleLevel = map[string]access{
	RoleView:    needView,
	RoleControl: needControl,
	RoleShell:   needShell,
}

func (a access) String() string {
	switch a {
	case needView:
		return RoleView
	case needControl:
		return RoleControl
	case needShell:
		return RoleShell
	case needDaemon:
		return "daemon"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// need is the middleware that refuses a token whose role does not reach
// level. Every route under /v1 and /metrics names its level this way,
// beside its path (New, actionRoutes, networkRoutes), and the
// authorization table test (access_test.go) holds each route to it.
func need(level access) gin.HandlerFunc {
	return func(c *gin.Context) {
		g, ok := grantOf(c)
		if !ok || roleLevel[g.role] >= level {
			c.Next()
			return
		}
		msg := fmt.Sprintf("this %s token cannot do that: it needs a %s token", g.role, level)
		if level == needDaemon {
			msg = fmt.Sprintf("this needs the daemon's token; a per-desktop %s token cannot do it", g.role)
		}
		abort(c, http.StatusForbidden, "forbidden", msg, "")
	}
}

// mayControl reports whether the request may send input: for checks that
// depend on a parameter (a VNC socket's mode), not on the route.
func mayControl(c *gin.Context) bool {
	g, ok := grantOf(c)
	return !ok || roleLevel[g.role] >= needControl
}

// isDaemon reports whether the daemon's token authorised the request.
func isDaemon(c *gin.Context) bool {
	_, ok := grantOf(c)
	return !ok
}
