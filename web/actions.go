package web

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// actionRoutes registers the routes that drive a desktop, and the control
// handover and per-desktop token routes.
func (s *Server) actionRoutes(g *gin.RouterGroup) {
	g.POST("/desktops/:id/control", s.setControl)
	g.POST("/desktops/:id/tokens", s.issueToken)
	g.POST("/desktops/:id/actions", s.postActions)
	g.POST("/desktops/:id/computer/anthropic", s.postAnthropic)
	g.POST("/desktops/:id/computer/openai", s.postOpenAI)
	g.GET("/desktops/:id/control", s.controlSocket)
	g.POST("/desktops/:id/exec", s.postExec)
	g.GET("/desktops/:id/files", s.getFile)
	g.PUT("/desktops/:id/files", s.putFile)
	g.GET("/desktops/:id/clipboard", s.getClipboard)
	g.PUT("/desktops/:id/clipboard", s.putClipboard)
}

// mayDrive refuses tokens that may only watch.
func mayDrive(c *gin.Context) bool {
	if !mayControl(c) {
		abort(c, http.StatusForbidden, "forbidden", "this token may only watch: ask for a control token", "")
		return false
	}
	return true
}
