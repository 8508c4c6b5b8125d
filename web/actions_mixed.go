package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// A turn that holds both toolsets' calls (the computer toolset's or the
// computer tool's, and the browser toolset's) runs on one desktop in the
// order the model wrote them, whichever of the two endpoints it is posted
// to. The first failure stops the whole turn: every later call, of either
// toolset, answers is_error with its own toolset's "Not executed" text,
// since both act on the one machine the model planned for.

// toolsetOf tells which toolset a turn's block belongs to.
type toolsetOf int

const (
	notATool toolsetOf = iota
	computerCall
	browserCall
	otherTool
)

// turnSegment is a run of consecutive calls of one toolset: each runs
// through that toolset's own runner.
type turnSegment struct {
	kind   toolsetOf
	blocks []json.RawMessage
	// first is the index of the segment's first block in the turn.
	first int
	// The segment's calls, decoded before any call of the turn runs.
	computer []input.AnthropicToolUse
	browser  []browsertool.ToolUse
}

// classifyBlock dispatches on the pair (toolset_name, name), as the
// reference says: members of the two toolsets share names.
func classifyBlock(raw json.RawMessage) toolsetOf {
	var b struct {
		Type        string `json:"type"`
		Name        string `json:"name"`
		ToolsetName string `json:"toolset_name"`
	}
	if json.Unmarshal(raw, &b) != nil || b.Type != "tool_use" {
		return notATool
	}
	switch {
	case b.ToolsetName == browsertool.ToolsetName:
		return browserCall
	case (b.ToolsetName == "" || b.ToolsetName == "computer") && input.IsAnthropicComputerTool(b.Name):
		return computerCall
	}
	return otherTool
}

// splitTurn cuts a turn's calls into runs of one toolset, and counts the
// other tools' calls (the caller answers those). mixed tells a turn with
// calls of both toolsets.
func splitTurn(blocks []json.RawMessage) (segments []turnSegment, others int, mixed bool) {
	seen := map[toolsetOf]bool{}
	for i, raw := range blocks {
		kind := classifyBlock(raw)
		switch kind {
		case notATool:
			continue
		case otherTool:
			others++
			continue
		}
		seen[kind] = true
		if n := len(segments); n > 0 && segments[n-1].kind == kind {
			segments[n-1].blocks = append(segments[n-1].blocks, raw)
			continue
		}
		segments = append(segments, turnSegment{kind: kind, blocks: []json.RawMessage{raw}, first: i})
	}
	return segments, others, seen[computerCall] && seen[browserCall]
}

// isMixedTurn tells a turn body that holds calls of both toolsets.
func isMixedTurn(body []byte) bool {
	blocks, err := input.TurnBlocks(body)
	if err != nil {
		return false
	}
	_, _, mixed := splitTurn(blocks)
	return mixed
}

// mixedTurn runs a turn of both toolsets. The body's tools entries set
// each toolset's members on or off, as for either endpoint alone.
func (s *Server) mixedTurn(c *gin.Context, spec drive.Request, body []byte) {
	blocks, err := input.TurnBlocks(body)
	if err != nil {
		failWith(c, err)
		return
	}
	disabled, err := input.DecodeAnthropicToolset(body)
	if err != nil {
		failWith(c, err)
		return
	}
	toolset, err := decodeBrowserToolset(body)
	if err != nil {
		failWith(c, err)
		return
	}
	id := c.Param("id")
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	spec.NoUpscale = !isDaemon(c)
	segments, others, _ := splitTurn(blocks)
	// Every call is decoded before any runs: a bad block fails the
	// request, naming it by its place in the turn, with nothing done.
	for i := range segments {
		if err := segments[i].decode(); err != nil {
			failWith(c, err)
			return
		}
	}
	var content []any
	failed, done := -1, 0
	for _, seg := range segments {
		results, segFailed, err := s.runSegment(c, id, spec, seg, disabled, toolset, failed >= 0)
		if err != nil {
			fail(c, fmt.Errorf("the turn's call %d: %w", done, err))
			return
		}
		if failed < 0 && segFailed >= 0 {
			failed = done + segFailed
		}
		content = append(content, results...)
		done += len(seg.blocks)
	}
	if others > 0 {
		c.Header("X-Warmdesk-Other-Tools", strconv.Itoa(others))
	}
	if failed >= 0 {
		c.Header("X-Warmdesk-Failed-Call", strconv.Itoa(failed))
	}
	c.JSON(http.StatusOK, api.MixedTurnResult{Role: "user", Content: content})
}

// decode reads the segment's calls with its toolset's decoder; a
// refusal's field names the block's place in the whole turn.
func (seg *turnSegment) decode() error {
	body, err := json.Marshal(seg.blocks)
	if err != nil {
		return err
	}
	if seg.kind == browserCall {
		seg.browser, _, err = browsertool.DecodeTurn(body)
	} else {
		seg.computer, _, err = input.DecodeAnthropicTurn(body)
	}
	var verr *input.ValidationError
	if errors.As(err, &verr) {
		var k int
		if n, _ := fmt.Sscanf(verr.Field, "content[%d]", &k); n == 1 {
			shifted := *verr
			shifted.Field = strings.Replace(verr.Field, fmt.Sprintf("content[%d]", k), fmt.Sprintf("content[%d]", seg.first+k), 1)
			return &shifted
		}
	}
	return err
}

// runSegment runs one toolset's run of calls, or answers each "Not
// executed" when an earlier call of the turn failed. An error is the
// desktop's (gone, no Chromium): no call of the segment ran.
func (s *Server) runSegment(c *gin.Context, id string, spec drive.Request, seg turnSegment, disabled map[string]bool, toolset browsertool.Toolset, halted bool) ([]any, int, error) {
	ctx := c.Request.Context()
	var out []any
	if seg.kind == browserCall {
		if halted {
			for _, u := range seg.browser {
				out = append(out, browsertool.NotExecutedResult(u.ID))
			}
			return out, -1, nil
		}
		results, failed, err := s.cfg.Drive.BrowserTurn(ctx, id, seg.browser, toolset)
		for _, r := range results {
			out = append(out, r)
		}
		return out, failed, err
	}
	if halted {
		for _, u := range seg.computer {
			out = append(out, input.AnthropicNotExecutedResult(u.ID))
		}
		return out, -1, nil
	}
	results, failed := s.runComputerCalls(ctx, id, spec, seg.computer, disabled)
	for _, r := range results {
		out = append(out, r)
	}
	return out, failed, nil
}

// decodeBrowserToolset reads the browser toolset's entry from a message
// body's tools (its defaults when the body is a bare array of blocks).
func decodeBrowserToolset(body []byte) (browsertool.Toolset, error) {
	if b := strings.TrimSpace(string(body)); b == "" || b[0] != '{' {
		return browsertool.DefaultToolset(), nil
	}
	var msg struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return browsertool.Toolset{}, &input.ValidationError{Field: "tools", Reason: "a list of tools entries: " + err.Error()}
	}
	return browsertool.DecodeToolset(msg.Tools)
}
