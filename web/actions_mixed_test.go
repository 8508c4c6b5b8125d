package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/input"
)

// A turn of both toolsets runs in the model's order on the one desktop,
// whichever endpoint it is posted to: the first failure stops the whole
// turn, each later call answering its own toolset's "Not executed" (the
// browser's with toolset_name echoed), and a browser member named like a
// computer one (left_click) is never run as the computer's.
func TestMixedTurnStopsBothToolsetsAtTheFirstFailure(t *testing.T) {
	h := newActHarness(t)
	turn := `{"role": "assistant", "content": [
	  {"type": "tool_use", "id": "c1", "name": "left_click", "toolset_name": "computer", "input": {"coordinate": [100, 50]}},
	  {"type": "tool_use", "id": "c2", "name": "left_click", "toolset_name": "computer", "input": {"coordinate": [100]}},
	  {"type": "tool_use", "id": "b1", "name": "left_click", "toolset_name": "browser", "input": {"target": {"type": "ref", "ref": "ref_1"}}},
	  {"type": "tool_use", "id": "c3", "name": "type", "input": {"text": "never typed"}},
	  {"type": "tool_use", "id": "x1", "name": "bash", "input": {"command": "ls"}}]}`
	for _, endpoint := range []string{"/computer/anthropic", "/browser/anthropic"} {
		t.Run(strings.TrimPrefix(endpoint, "/"), func(t *testing.T) {
			status, header, body := h.doHeader("POST", h.path(endpoint)+"?settle_ms=0", turn)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var msg struct {
				Role    string            `json:"role"`
				Content []json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(body, &msg); err != nil || msg.Role != "user" || len(msg.Content) != 4 {
				t.Fatalf("%v: %s", err, body)
			}
			if got := header.Get("X-Warmdesk-Failed-Call"); got != "1" {
				t.Errorf("X-Warmdesk-Failed-Call %q, want 1", got)
			}
			if got := header.Get("X-Warmdesk-Other-Tools"); got != "1" {
				t.Errorf("X-Warmdesk-Other-Tools %q, want 1", got)
			}
			var results []mixedResult
			for _, raw := range msg.Content {
				var r mixedResult
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatal(err)
				}
				results = append(results, r)
			}
			if r := results[0]; r.ToolUseID != "c1" || r.IsError {
				t.Errorf("c1 %+v", r)
			}
			if r := results[1]; r.ToolUseID != "c2" || !r.IsError || !strings.Contains(r.Content[0].Text, "coordinate") {
				t.Errorf("c2 %+v", r)
			}
			if r := results[2]; r.ToolUseID != "b1" || !r.IsError || r.ToolsetName != "browser" || r.Content[0].Text != browsertool.NotExecuted {
				t.Errorf("b1 %+v", r)
			}
			if r := results[3]; r.ToolUseID != "c3" || !r.IsError || r.Content[0].Text != input.AnthropicNotExecuted {
				t.Errorf("c3 %+v", r)
			}
		})
	}
}

// mixedResult is a tool_result of either toolset.
type mixedResult struct {
	ToolUseID   string `json:"tool_use_id"`
	ToolsetName string `json:"toolset_name"`
	IsError     bool   `json:"is_error"`
	Content     []struct{ Type, Text string }
}

// A bad block anywhere in a mixed turn fails the request before any call
// runs, named by its place in the whole turn.
func TestMixedTurnRefusesABadBlockBeforeRunning(t *testing.T) {
	h := newActHarness(t)
	turn := `[
	  {"type": "tool_use", "id": "c1", "name": "left_click", "input": {"coordinate": [100, 50]}},
	  {"type": "text", "text": "then the browser"},
	  {"type": "tool_use", "name": "left_click", "toolset_name": "browser", "input": {"target": {"type": "ref", "ref": "ref_1"}}}]`
	status, body := h.do("POST", h.path("/computer/anthropic")+"?settle_ms=0", turn)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "content[2].id") {
		t.Fatalf("status %d: %s, want 400 naming content[2].id", status, body)
	}
	if frames := h.frames(); len(frames) != 0 {
		t.Errorf("input was sent before the turn was refused: %+v", frames)
	}
}
