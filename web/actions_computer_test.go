package web_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

type toolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
	Content   []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source *struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	} `json:"content"`
}

func TestAnthropicAdapter(t *testing.T) {
	cases := []struct {
		name, query, body string
		header            []string
		wantNative        *input.Point // where the first move lands
		wantText          string       // a text block instead of an image
		wantID            string
		wantImage         [2]int
	}{
		{
			name: "left_click in the declared display", query: "?display_width_px=640&display_height_px=400",
			body:       `{"action": "left_click", "coordinate": [320, 200]}`,
			wantNative: pt(screenshot.ScaleTo(1280, 800, 640, 400).ToNative(320, 200)), wantImage: [2]int{640, 400},
		},
		{
			name: "display declared in headers", header: []string{"X-Display-Width-Px", "1024", "X-Display-Height-Px", "640"},
			body:       `{"action": "mouse_move", "coordinate": [1023, 639]}`,
			wantNative: &input.Point{X: 1279, Y: 799}, wantImage: [2]int{1024, 640},
		},
		{
			name:   "a whole tool_use block",
			body:   `{"type": "tool_use", "id": "toolu_01A", "name": "computer", "input": {"action": "screenshot"}}`,
			wantID: "toolu_01A", wantImage: [2]int{1280, 800},
		},
		{
			name: "tool_use_id in the query", query: "?tool_use_id=toolu_02B",
			body:   `{"action": "key", "text": "ctrl+a Delete"}`,
			wantID: "toolu_02B", wantImage: [2]int{1280, 800},
		},
		{
			name:     "cursor_position answers text in the declared space",
			query:    "?display_width_px=640&display_height_px=400",
			body:     `{"action": "cursor_position"}`,
			wantText: "X=0,Y=0",
		},
		{
			name: "zoom fills the display with the region",
			body: `{"action": "zoom", "region": [0, 0, 640, 200]}`, wantImage: [2]int{1280, 400},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newActHarness(t)
			h.guest.SetPointer(0, 0)
			status, body := h.do("POST", h.path("/computer/anthropic")+c.query+sep(c.query)+"settle_ms=0", c.body, c.header...)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var tr toolResult
			if err := json.Unmarshal(body, &tr); err != nil {
				t.Fatal(err)
			}
			if tr.Type != "tool_result" || tr.ToolUseID != c.wantID || tr.IsError || len(tr.Content) != 1 {
				t.Fatalf("tool result %s", body)
			}
			block := tr.Content[0]
			if c.wantText != "" {
				if block.Type != "text" || block.Text != c.wantText {
					t.Errorf("content %+v, want text %q", block, c.wantText)
				}
			} else {
				if block.Type != "image" || block.Source.Type != "base64" || block.Source.MediaType != "image/png" {
					t.Fatalf("content %+v", block.Type)
				}
				data, _ := base64.StdEncoding.DecodeString(block.Source.Data)
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				if b := img.Bounds(); b.Dx() != c.wantImage[0] || b.Dy() != c.wantImage[1] {
					t.Errorf("image %v, want %v", b, c.wantImage)
				}
			}
			if c.wantNative != nil {
				f := h.frames()
				if len(f) == 0 || f[0][0].X != c.wantNative.X || f[0][0].Y != c.wantNative.Y {
					t.Errorf("frames %v, want a move to %v first", f, *c.wantNative)
				}
			}
		})
	}
}

func TestAnthropicAdapterErrors(t *testing.T) {
	h := newActHarness(t)
	cases := []struct{ name, query, body, field, text string }{
		{"unknown action", "", `{"action": "fly"}`, "action", "action: unknown action"},
		{"coordinate outside the display", "?display_width_px=640&display_height_px=400", `{"action": "left_click", "coordinate": [640, 10]}`, "actions[0].x", "coordinate: 640 is outside"},
		{"missing text", "", `{"action": "type"}`, "text", "text: required"},
		{"tool_use without input", "", `{"type": "tool_use", "id": "toolu_9", "name": "computer"}`, "input", "input: required"},
		{"bad display", "?display_width_px=wide&display_height_px=400", `{"action": "screenshot"}`, "display_width_px", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do("POST", h.path("/computer/anthropic")+c.query, c.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, body)
			}
			var resp struct {
				Error struct {
					Code, Field string
				}
				ToolResult toolResult `json:"tool_result"`
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Error.Field != c.field {
				t.Errorf("field %q, want %q (%s)", resp.Error.Field, c.field, body)
			}
			if c.text == "" {
				return
			}
			tr := resp.ToolResult
			if !tr.IsError || len(tr.Content) != 1 || !strings.Contains(tr.Content[0].Text, c.text) {
				t.Errorf("tool_result %+v, want an error text with %q", tr, c.text)
			}
		})
	}
	if n := len(h.frames()); n != 0 {
		t.Errorf("%d frames sent for rejected calls", n)
	}
}

func TestOpenAIAdapter(t *testing.T) {
	h := newActHarness(t)
	// A GA computer_call with a batch of actions, as the model emits it.
	item := `{"type": "computer_call", "id": "cu_1", "call_id": "call_7", "status": "completed",
		"actions": [
			{"type": "click", "button": "left", "x": 100, "y": 50},
			{"type": "type", "text": "hello"},
			{"type": "keypress", "keys": ["CTRL", "L"]},
			{"type": "scroll", "x": 10, "y": 10, "scroll_x": 0, "scroll_y": 250}
		],
		"pending_safety_checks": [{"id": "cs_1", "code": "malicious_instructions", "message": "check"}, {"id": "cs_2"}]}`
	// One check of two acknowledged: nothing runs, as a Gemini call a
	// person did not confirm.
	for _, q := range []string{"", "&acknowledge_safety_checks=cs_2", "&acknowledge_safety_checks=none"} {
		status, body := h.do("POST", h.path("/computer/openai")+"?settle_ms=0"+q, item)
		code, field, _, msg := actError(t, body)
		if status != http.StatusConflict || code != "confirmation_required" || field != "pending_safety_checks[0]" ||
			!strings.Contains(msg, "malicious_instructions") || !strings.Contains(msg, "acknowledge_safety_checks=") {
			t.Errorf("%s: %d %s, want 409 confirmation_required on cs_1", q, status, body)
		}
	}
	if n := len(h.frames()); n != 0 {
		t.Fatalf("%d input frames sent for an unacknowledged call", n)
	}
	status, body := h.do("POST", h.path("/computer/openai")+"?settle_ms=0&acknowledge_safety_checks=cs_2,cs_1", item)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var out input.OpenAIComputerCallOutput
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	// No detail unless asked: OpenAI's schema has none on this output.
	if out.Type != "computer_call_output" || out.CallID != "call_7" || out.Output.Type != "computer_screenshot" ||
		!strings.HasPrefix(out.Output.ImageURL, "data:image/png;base64,") || strings.Contains(string(body), "detail") {
		t.Errorf("output %s", body)
	}
	if len(out.AcknowledgedSafetyChecks) != 2 || out.AcknowledgedSafetyChecks[0].ID != "cs_1" || out.AcknowledgedSafetyChecks[1].ID != "cs_2" {
		t.Errorf("acknowledged %+v, want cs_1 and cs_2", out.AcknowledgedSafetyChecks)
	}
	wheel := 0
	for _, f := range h.frames() {
		for _, e := range f {
			if e.Kind == desktop.InputButton && e.Button == "wheel-down" && e.Down {
				wheel++
			}
		}
	}
	if wheel != 3 {
		t.Errorf("%d wheel notches for 250 px, want 3", wheel)
	}

	// The preview tool's single action, its detail asked for.
	status, body = h.do("POST", h.path("/computer/openai")+"?settle_ms=0&acknowledge_safety_checks=all&detail=original",
		`{"type": "computer_call", "call_id": "call_8", "action": {"type": "screenshot"}, "pending_safety_checks": [{"id": "cs_3"}]}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"acknowledged_safety_checks":[{"id":"cs_3"}]`) || !strings.Contains(string(body), `"detail":"original"`) {
		t.Errorf("preview call: %d %s", status, body)
	}
}

func TestOpenAIAdapterErrors(t *testing.T) {
	h := newActHarness(t)
	cases := []struct{ name, query, body, field string }{
		{"no call_id", "", `{"type": "computer_call", "action": {"type": "screenshot"}}`, "call_id"},
		{"unknown action", "", `{"type": "computer_call", "call_id": "c", "actions": [{"type": "screenshot"}, {"type": "teleport"}]}`, "actions[1].type"},
		{"outside the display", "?display_width=640&display_height=400", `{"type": "computer_call", "call_id": "c", "actions": [{"type": "click", "x": 10, "y": 400}]}`, "actions[0].y"},
		{"bad key, in the item's names", "", `{"type": "computer_call", "call_id": "c", "action": {"type": "keypress", "keys": ["CTRL", "NOPE"]}}`, "action.keys[1]"},
		{"bad acknowledgement", "?acknowledge_safety_checks=,", `{"type": "computer_call", "call_id": "c", "action": {"type": "screenshot"}}`, "acknowledge_safety_checks"},
		{"bad detail", "?detail=ultra", `{"type": "computer_call", "call_id": "c", "action": {"type": "screenshot"}}`, "detail"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do("POST", h.path("/computer/openai")+c.query, c.body)
			code, field, _, _ := actError(t, body)
			if status != http.StatusBadRequest || code != "invalid" || field != c.field {
				t.Errorf("%d %s field %q, want 400 field %q (%s)", status, code, field, c.field, body)
			}
		})
	}
	if n := len(h.frames()); n != 0 {
		t.Errorf("%d frames sent for rejected calls", n)
	}
}

func pt(x, y int) *input.Point { return &input.Point{X: x, Y: y} }

func sep(q string) string {
	if q == "" {
		return "?"
	}
	return "&"
}

// A whole assistant turn of the computer toolset runs its calls in order
// and stops at the first that fails: the earlier ran, the failed one names
// its field, the later ones answer is_error unrun and send no input. The
// answer is the next user message.
func TestAnthropicToolsetTurn(t *testing.T) {
	h := newActHarness(t)
	turn := `{"role": "assistant", "content": [
	  {"type": "text", "text": "Clicking, then typing."},
	  {"type": "tool_use", "id": "t1", "name": "left_click", "input": {"coordinate": [100, 50]}},
	  {"type": "tool_use", "id": "t2", "name": "left_click", "input": {"coordinate": [100]}},
	  {"type": "tool_use", "id": "t3", "name": "type", "input": {"text": "never typed"}},
	  {"type": "tool_use", "id": "b1", "name": "bash", "input": {"command": "ls"}}]}`
	req, _ := http.NewRequest("POST", h.srv.URL+h.path("/computer/anthropic")+"?settle_ms=0", strings.NewReader(turn))
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Role    string       `json:"role"`
		Content []toolResult `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || msg.Role != "user" || len(msg.Content) != 3 {
		t.Fatalf("status %d, %+v", resp.StatusCode, msg)
	}
	if got := resp.Header.Get("X-Warmdesk-Failed-Call"); got != "1" {
		t.Errorf("X-Warmdesk-Failed-Call %q, want 1", got)
	}
	if got := resp.Header.Get("X-Warmdesk-Other-Tools"); got != "bash" {
		t.Errorf("X-Warmdesk-Other-Tools %q, want bash", got)
	}
	if r := msg.Content[0]; r.ToolUseID != "t1" || r.IsError || r.Content[0].Type != "image" {
		t.Errorf("first %+v", r)
	}
	if r := msg.Content[1]; r.ToolUseID != "t2" || !r.IsError || !strings.Contains(r.Content[0].Text, "coordinate") {
		t.Errorf("second %+v", r)
	}
	if r := msg.Content[2]; r.ToolUseID != "t3" || !r.IsError || r.Content[0].Text != "Not executed: an earlier computer action in this turn failed." {
		t.Errorf("third %+v", r)
	}
	for _, frame := range h.frames() {
		for _, ev := range frame {
			if ev.Kind == desktop.InputKey {
				t.Fatalf("a key was sent after the failed call: %+v", h.frames())
			}
		}
	}
	// An unknown desktop fails the request, not each call.
	status, body := h.do("POST", "/v1/desktops/d-none/computer/anthropic", turn)
	if status != http.StatusNotFound {
		t.Errorf("unknown desktop: %d %s", status, body)
	}
}

// A Gemini turn maps the 0-999 grid onto the screen, answers each call with
// its screenshot, and stops at the first failure.
func TestGeminiTurn(t *testing.T) {
	h := newActHarness(t)
	h.guest.SetPointer(0, 0)
	turn := `{"role": "model", "parts": [
	  {"text": "Clicking the middle."},
	  {"functionCall": {"name": "click_at", "args": {"x": 500, "y": 500, "intent": "middle"}}},
	  {"functionCall": {"name": "key_down", "args": {"key": "shift"}}},
	  {"functionCall": {"name": "go_back", "args": {}}}]}`
	req, _ := http.NewRequest("POST", h.srv.URL+h.path("/computer/gemini")+"?settle_ms=0", strings.NewReader(turn))
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var content struct {
		Role  string `json:"role"`
		Parts []struct {
			FunctionResponse struct {
				Name     string         `json:"name"`
				Response map[string]any `json:"response"`
				Parts    []struct {
					InlineData struct {
						MimeType string `json:"mimeType"`
						Data     []byte `json:"data"`
					} `json:"inlineData"`
				} `json:"parts"`
			} `json:"functionResponse"`
		} `json:"parts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&content); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || content.Role != "user" || len(content.Parts) != 3 || resp.Header.Get("X-Warmdesk-Failed-Call") != "1" {
		t.Fatalf("status %d, failed call %q, %+v", resp.StatusCode, resp.Header.Get("X-Warmdesk-Failed-Call"), content)
	}
	first := content.Parts[0].FunctionResponse
	if first.Name != "click_at" || len(first.Parts) != 1 || first.Parts[0].InlineData.MimeType != "image/png" {
		t.Fatalf("first %+v", first)
	}
	if _, err := png.Decode(bytes.NewReader(first.Parts[0].InlineData.Data)); err != nil {
		t.Errorf("the screenshot is not a PNG: %v", err)
	}
	if e, _ := content.Parts[1].FunctionResponse.Response["error"].(string); !strings.Contains(e, "key_down is not supported") {
		t.Errorf("second %+v", content.Parts[1])
	}
	if e, _ := content.Parts[2].FunctionResponse.Response["error"].(string); e != input.GeminiNotExecuted {
		t.Errorf("third %+v", content.Parts[2])
	}
	f := h.frames()
	if len(f) == 0 || f[0][0].X != 640 || f[0][0].Y != 400 {
		t.Errorf("frames %v, want the click's move to 640,400 (grid 500,500 on 1280x800) first", f)
	}
	for _, frame := range f {
		for _, ev := range frame {
			if ev.Kind == desktop.InputKey {
				t.Fatalf("a key was sent after the failed call: %v", f)
			}
		}
	}
}

// A Gemini turn as a Python SDK's model_dump() gives it (every part with
// each field, null where unset) is one call, answered once with its id; on
// a desktop without a browser, navigate is refused and nothing is typed,
// and no response claims a url.
func TestGeminiTurnWithoutABrowser(t *testing.T) {
	h := newActHarness(t)
	turn := `{"role": "model", "parts": [
	  {"text": "Opening the page.", "function_call": null, "function_response": null, "thought": null, "inline_data": null},
	  {"text": null, "function_call": {"id": "fc_nav", "name": "navigate", "args": {"url": "http://127.0.0.1:8000/holdout-nav"}, "partial_args": null}}]}`
	status, body := h.do(http.MethodPost, h.path("/computer/gemini")+"?settle_ms=0", turn)
	var content struct {
		Parts []struct {
			FunctionResponse struct {
				ID       string         `json:"id"`
				Name     string         `json:"name"`
				Response map[string]any `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(body, &content); err != nil || status != http.StatusOK || len(content.Parts) != 1 {
		t.Fatalf("%d %s (%v)", status, body, err)
	}
	r := content.Parts[0].FunctionResponse
	if e, _ := r.Response["error"].(string); r.ID != "fc_nav" || r.Name != "navigate" || !strings.Contains(e, "no browser") {
		t.Errorf("response %+v", r)
	}
	if typed := h.guest.Typed(); len(typed) != 0 || len(h.frames()) != 0 {
		t.Errorf("typed %q, %d input frames", typed, len(h.frames()))
	}
	// A desktop function runs, answers its id, and has no url.
	status, body = h.do(http.MethodPost, h.path("/computer/gemini")+"?settle_ms=0", `{"functionCall": {"id": "fc_1", "name": "click", "args": {"x": 10, "y": 10}}}`)
	if status != http.StatusOK || !bytes.Contains(body, []byte(`"id":"fc_1","name":"click"`)) || bytes.Contains(body, []byte(`"url"`)) || bytes.Contains(body, []byte(`"error"`)) {
		t.Errorf("click: %d %.300s", status, body)
	}
	if !clicked(h.frames()) {
		t.Error("the click was not sent")
	}
}

func clicked(frames [][]desktop.InputEvent) bool {
	for _, f := range frames {
		for _, e := range f {
			if e.Kind == desktop.InputButton && e.Down {
				return true
			}
		}
	}
	return false
}
