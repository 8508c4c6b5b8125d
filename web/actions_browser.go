package web

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/browsertool"
)

// postBrowserTurn runs an assistant turn of Anthropic's browser toolset
// (browser_toolset_20260801) on the desktop's Chromium: its browser
// members' tool_use blocks in order, stopping at the first failure (the
// rest answer "Not executed"). The body is the turn's content blocks, or a
// message with them in content and, beside it, the request's tools (whose
// browser toolset entry's configs enable the optional members). The answer
// is 200 with the next user message whatever failed inside the turn;
// X-Warmdesk-Failed-Call gives the failed call's index, and
// X-Warmdesk-Other-Tools counts the tool_use blocks of other tools, which
// the caller answers.
func (s *Server) postBrowserTurn(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	if isMixedTurn(body) {
		if spec, ok := adapterSpec(c, "display_width_px", "display_height_px"); ok {
			s.mixedTurn(c, spec, body)
		}
		return
	}
	uses, others, err := browsertool.DecodeTurn(body)
	if err != nil {
		failWith(c, err)
		return
	}
	toolset, err := decodeBrowserToolset(body)
	if err != nil {
		failWith(c, err)
		return
	}
	results, failed, err := s.cfg.Drive.BrowserTurn(c.Request.Context(), c.Param("id"), uses, toolset)
	if err != nil {
		fail(c, err)
		return
	}
	if others > 0 {
		c.Header("X-Warmdesk-Other-Tools", strconv.Itoa(others))
	}
	if failed >= 0 {
		c.Header("X-Warmdesk-Failed-Call", strconv.Itoa(failed))
	}
	c.JSON(http.StatusOK, api.BrowserTurnResult{Role: "user", Content: results})
}
