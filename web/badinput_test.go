package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// brokenText is what a client sent as text: the \xff\xfe and the cut
// \xc3 are not UTF-8, which encoding/json would decode as three U+FFFD.
const brokenText = "ok\xff\xfe\xc3("

// Text that is not UTF-8 is 400 naming its field at every door that takes
// text, and nothing is typed; Python's surrogateescape form (\udcff) too.
func TestBrokenTextRefusedAtEveryDoor(t *testing.T) {
	h := newActHarness(t)
	for _, c := range []struct{ name, path, body, field string }{
		{"batch", "/actions", `{"actions": [{"action": "type", "text": "` + brokenText + `"}]}`, "actions[0].text"},
		{"batch, escaped", "/actions", `{"actions": [{"action": "key", "chord": "a"}, {"action": "type", "text": "ok\udcff"}]}`, "actions[1].text"},
		{"anthropic", "/computer/anthropic", `{"action": "type", "text": "` + brokenText + `"}`, "text"},
		{"anthropic turn", "/computer/anthropic", `{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "computer", "input": {"action": "type", "text": "` + brokenText + `"}}]}`, "content[0].input.text"},
		{"openai", "/computer/openai", `{"type": "computer_call", "call_id": "c", "actions": [{"type": "type", "text": "` + brokenText + `"}]}`, "actions[0].text"},
		{"gemini", "/computer/gemini", `{"role": "model", "parts": [{"functionCall": {"name": "type", "args": {"text": "` + brokenText + `"}}}]}`, "parts[0].functionCall.args.text"},
		{"clipboard", "/clipboard", `{"text": "` + brokenText + `"}`, "text"},
	} {
		status, body := h.do(http.MethodPost, h.path(c.path), c.body)
		if c.name == "clipboard" {
			status, body = h.do(http.MethodPut, h.path(c.path), c.body)
		}
		code, field, _, msg := actError(t, body)
		if status != http.StatusBadRequest || code != "invalid" || field != c.field || !strings.Contains(msg, "UTF-8") {
			t.Errorf("%s: %d %s, want 400 on %s", c.name, status, body, c.field)
		}
	}
	// The control WebSocket answers the message by its id.
	cc := h.control(t)
	cc.next() // hello
	cc.send(`{"id": "t", "type": "actions", "actions": [{"action": "type", "text": "` + brokenText + `"}]}`)
	if m := cc.next(); m.ID != "t" || m.Type != "error" || m.Status != http.StatusBadRequest || m.Error == nil || m.Error.Field != "actions[0].text" {
		t.Errorf("control socket: %+v", m)
	}
	if typed := h.guest.Typed(); len(typed) != 0 || len(h.frames()) != 0 {
		t.Errorf("broken text typed %q, %d input frames", typed, len(h.frames()))
	}
}

// Over MCP, broken text in a tool's arguments is JSON-RPC's invalid
// params naming the field; nothing is typed.
func TestBrokenTextRefusedOverMCP(t *testing.T) {
	h := newActHarness(t)
	cs, err := mcpSession(t, h.srv.URL+"/mcp", actToken)
	if err != nil {
		t.Fatal(err)
	}
	msg := `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "computer", "arguments": {"desktop_id": "` + h.id + `", "action": "type", "text": "` + brokenText + `"}}}`
	status, body := h.do(http.MethodPost, "/mcp", msg, "Content-Type", "application/json",
		"Accept", "application/json, text/event-stream", "Mcp-Session-Id", cs.ID())
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || status != http.StatusOK || answer.ID != 7 || answer.Error.Code != -32602 ||
		!strings.Contains(answer.Error.Message, "params.arguments.text: is not valid UTF-8") {
		t.Errorf("%d %s (%v)", status, body, err)
	}
	if typed := h.guest.Typed(); len(typed) != 0 || len(h.frames()) != 0 {
		t.Errorf("typed %q, %d input frames", typed, len(h.frames()))
	}
}

// A body over the limit is 413 naming it on every route that takes JSON,
// not 400 on some.
func TestTooLargeBodyIs413Everywhere(t *testing.T) {
	h := newActHarness(t)
	big := `{"pad": "` + strings.Repeat("x", 10<<20) + `"}`
	for _, route := range []struct{ method, path string }{
		{http.MethodPost, "/v1/desktops"},
		{http.MethodPost, h.path("/actions")},
		{http.MethodPost, h.path("/computer/anthropic")},
		{http.MethodPost, h.path("/computer/openai")},
		{http.MethodPost, h.path("/computer/gemini")},
		{http.MethodPost, h.path("/exec")},
		{http.MethodPut, h.path("/clipboard")},
		{http.MethodPut, h.path("/network")},
		{http.MethodPost, h.path("/tokens")},
	} {
		status, body := h.do(route.method, route.path, big)
		code, _, _, msg := actError(t, body)
		if status != http.StatusRequestEntityTooLarge || code != "too_large" || !strings.Contains(msg, "limit of 1048576 bytes") {
			t.Errorf("%s %s: %d %.200s", route.method, route.path, status, body)
		}
	}
	if status, body := h.do(http.MethodPost, "/mcp", big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("/mcp: %d %.200s", status, body)
	}
}

// A directory is 400 saying so, not 413 with ext4's directory end of
// 2^63-1 bytes.
func TestGetDirectoryIs400(t *testing.T) {
	h := newActHarness(t)
	h.guest.MkDir("/etc")
	status, body := h.do(http.MethodGet, h.path("/files?path=/etc"), "")
	code, _, _, msg := actError(t, body)
	if status != http.StatusBadRequest || code != "invalid" || !strings.Contains(msg, "/etc is a directory") {
		t.Errorf("%d %s", status, body)
	}
}
