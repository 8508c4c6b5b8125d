package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/input"
)

// A screen that never settles: every door's answer says its picture was
// taken while the screen still changed, in the place its schema leaves for
// it, so an agent does not act on an early picture as if it were the
// outcome.
func TestEveryDoorSaysThePictureDidNotSettle(t *testing.T) {
	h := newActHarness(t)
	n := 0
	h.src.OnPoke(func() { n++; h.paint(actColor(n)) })
	const bounds = "settle_ms=100&timeout_ms=200"
	const unsettled = "the screen was still changing"

	status, body := h.do("POST", h.path("/actions"), `{"actions": [{"action": "screenshot"}], "settle_ms": 100, "timeout_ms": 200}`)
	var canonical api.ActionsResponse
	if err := json.Unmarshal(body, &canonical); status != http.StatusOK || err != nil {
		t.Fatalf("canonical: status %d, %v: %s", status, err, body)
	}
	if !anyContains(canonical.Warnings, unsettled) || canonical.Screenshot.Settle == nil || canonical.Screenshot.Settle.Settled {
		t.Errorf("canonical: warnings %q, settle %+v; want the unsettled picture said", canonical.Warnings, canonical.Screenshot.Settle)
	}

	status, body = h.do("POST", h.path("/computer/anthropic?"+bounds), `{"action": "screenshot"}`)
	var anthropic input.AnthropicToolResult
	if err := json.Unmarshal(body, &anthropic); status != http.StatusOK || err != nil {
		t.Fatalf("anthropic: status %d, %v: %s", status, err, body)
	}
	if last := anthropic.Content[len(anthropic.Content)-1]; anthropic.Content[0].Type != "image" || last.Type != "text" || !strings.HasPrefix(last.Text, "Note: "+unsettled) {
		t.Errorf("anthropic: content %+v, want the image then a Note about the unsettled screen", anthropic.Content)
	}

	status, header, body := h.doHeader("POST", h.path("/computer/openai?"+bounds),
		`{"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}, "pending_safety_checks": []}`)
	if status != http.StatusOK {
		t.Fatalf("openai: status %d: %s", status, body)
	}
	if header.Get("X-Warmdesk-Settled") != "false" || !strings.HasPrefix(header.Get("X-Warmdesk-Note"), unsettled) {
		t.Errorf("openai: X-Warmdesk-Settled %q, X-Warmdesk-Note %q; want false and the note", header.Get("X-Warmdesk-Settled"), header.Get("X-Warmdesk-Note"))
	}

	status, body = h.do("POST", h.path("/computer/gemini?"+bounds), `{"name": "wait_5_seconds", "args": {}}`)
	var gemini api.GeminiTurnResult
	if err := json.Unmarshal(body, &gemini); status != http.StatusOK || err != nil || len(gemini.Parts) != 1 {
		t.Fatalf("gemini: status %d, %v: %s", status, err, body)
	}
	notes, _ := gemini.Parts[0].FunctionResponse.Response["notes"].([]any)
	if len(notes) != 1 || !strings.HasPrefix(notes[0].(string), unsettled) {
		t.Errorf("gemini: response %+v, want notes with the unsettled screen", gemini.Parts[0].FunctionResponse.Response)
	}
}

// A click that a busy guest shows only the pointer's redraw for within the
// reaction bound: the answer says its effect may come later. The same
// click on an idle guest, and a screenshot alone, say nothing.
func TestAnswerSaysWhenTheScreenDidNotReact(t *testing.T) {
	h := newActHarness(t)
	click := `{"type": "computer_call", "call_id": "c0", "action": {"type": "click", "button": "left", "x": 10, "y": 10}, "pending_safety_checks": []}`
	status, header, body := h.doHeader("POST", h.path("/computer/openai?settle_ms=20&reaction_ms=100"), click)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if header.Get("X-Warmdesk-Settled") != "true" || header.Get("X-Warmdesk-Note") != "" {
		t.Errorf("idle guest: headers %v, want settled and no note", header)
	}
	h.f.Machine(t).SetBusy(true)
	status, header, body = h.doHeader("POST", h.path("/computer/openai?settle_ms=20&reaction_ms=100"), click)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if header.Get("X-Warmdesk-Settled") != "false" || !strings.Contains(header.Get("X-Warmdesk-Note"), "no reaction to the input within") || header.Get("X-Warmdesk-Reaction-Ms") == "" {
		t.Errorf("busy guest: headers %v, want not settled, the reaction time and a note that the effect may come later", header)
	}
	status, header, body = h.doHeader("POST", h.path("/computer/openai?settle_ms=20"),
		`{"type": "computer_call", "call_id": "c2", "action": {"type": "screenshot"}, "pending_safety_checks": []}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if header.Get("X-Warmdesk-Settled") != "true" || header.Get("X-Warmdesk-Note") != "" {
		t.Errorf("screenshot: headers %v, want settled and no note", header)
	}
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
