package web

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// pages registers the dashboard and the viewer.
func (s *Server) pages(e *gin.Engine) {
	e.GET("/", func(c *gin.Context) {
		c.String(http.StatusOK, "warmdesk: the dashboard is not built yet; the API is under /v1\n")
	})
}
