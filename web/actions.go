package web

import (
	"github.com/gin-gonic/gin"
)

// actionRoutes registers the routes that drive a desktop, and the control
// handover and per-desktop token routes.
func (s *Server) actionRoutes(g *gin.RouterGroup) {
	g.POST("/desktops/:id/control", need(needControl), s.setControl)
	g.POST("/desktops/:id/tokens", need(needDaemon), s.issueToken)
	g.DELETE("/desktops/:id/tokens", need(needDaemon), s.revokeTokens)
	g.POST("/desktops/:id/actions", need(needControl), s.postActions)
	g.POST("/desktops/:id/computer/anthropic", need(needControl), s.postAnthropic)
	g.POST("/desktops/:id/computer/openai", need(needControl), s.postOpenAI)
	g.POST("/desktops/:id/computer/gemini", need(needControl), s.postGemini)
	g.POST("/desktops/:id/browser/anthropic", need(needControl), s.postBrowserTurn)
	g.GET("/desktops/:id/control", need(needControl), s.controlSocket)
	g.POST("/desktops/:id/exec", need(needShell), s.postExec)
	g.GET("/desktops/:id/files", need(needShell), s.getFile)
	g.PUT("/desktops/:id/files", need(needShell), s.putFile)
	g.GET("/desktops/:id/clipboard", need(needShell), s.getClipboard)
	// Pasting is typing: the viewer's person with a control link does it.
	g.PUT("/desktops/:id/clipboard", need(needControl), s.putClipboard)
}
