package web

import (
	"github.com/gin-gonic/gin"
)

// Actions drives desktops' input, shell, files and clipboard; hostd/app
// provides it. The routes that use it are registered by actionRoutes.
type Actions interface{}

// actionRoutes registers the routes that drive a desktop, and the control
// handover and per-desktop token routes.
func (s *Server) actionRoutes(g *gin.RouterGroup) {
	g.POST("/desktops/:id/control", s.setControl)
	g.POST("/desktops/:id/tokens", s.issueToken)
}
