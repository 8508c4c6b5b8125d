package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
)

func TestActionsRejectsBadInputBeforeSending(t *testing.T) {
	h := newActHarness(t)
	many := strings.Repeat(`{"action":"wait","duration":0},`, 100) + `{"action":"wait","duration":0}`
	cases := []struct {
		name, body, field string
	}{
		{"malformed JSON", `{"actions": [`, ""},
		{"empty body", ``, ""},
		{"no actions", `{}`, "actions"},
		{"actions not a list", `{"actions": {"action": "click"}}`, "actions"},
		{"empty list", `{"actions": []}`, "actions"},
		{"unknown action", `{"actions": [{"action": "teleport"}]}`, "actions[0].action"},
		{"unknown field of an action", `{"actions": [{"action": "click", "x": 1, "y": 2, "z": 3}]}`, "actions[0].z"},
		{"unknown field of the request", `{"actions": [{"action": "screenshot"}], "screnshot": true}`, "screnshot"},
		{"wrong type", `{"actions": [{"action": "click", "x": "10", "y": 2}]}`, "actions[0].x"},
		{"wrong type of a request field", `{"actions": [{"action": "screenshot"}], "settle_ms": "fast"}`, "settle_ms"},
		{"fractional milliseconds", `{"actions": [{"action": "screenshot"}], "timeout_ms": 1.5}`, "timeout_ms"},
		{"missing parameter", `{"actions": [{"action": "move", "x": 1}]}`, "actions[0].y"},
		{"outside the screen", `{"actions": [{"action": "click", "x": 1280, "y": 0}]}`, "actions[0].x"},
		{"outside the declared display", `{"actions": [{"action": "click", "x": 700, "y": 0}], "display_width": 640, "display_height": 400}`, "actions[0].x"},
		{"a later action is bad", `{"actions": [{"action": "click", "x": 1, "y": 1}, {"action": "key", "chord": "ctrl+nokey"}]}`, "actions[1].chord[1]"},
		{"batch too large", `{"actions": [` + many + `]}`, "actions"},
		{"text too long", `{"actions": [{"action": "type", "text": "` + strings.Repeat("a", 4097) + `"}]}`, "actions[0].text"},
		{"settle out of range", `{"actions": [{"action": "screenshot"}], "settle_ms": 60000}`, "settle_ms"},
		{"half a display", `{"actions": [{"action": "screenshot"}], "display_width": 640}`, "display_height"},
		{"unknown format", `{"actions": [{"action": "screenshot"}], "format": "gif"}`, "format"},
		{"quality without jpeg", `{"actions": [{"action": "screenshot"}], "quality": 50}`, "quality"},
		{"trailing data", `{"actions": [{"action": "screenshot"}]} {}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do("POST", h.path("/actions"), c.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", status, body)
			}
			code, field, _, msg := actError(t, body)
			if code != "invalid" || field != c.field || msg == "" {
				t.Errorf("code %q field %q message %q, want invalid, field %q", code, field, msg, c.field)
			}
		})
	}
	if n := len(h.frames()); n != 0 {
		t.Errorf("%d frames reached the desktop from rejected batches", n)
	}
}

func TestActionsRunAndReport(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("POST", h.path("/actions"), `{"actions": [
		{"action": "click", "x": 10, "y": 20},
		{"action": "type", "text": "hi"},
		{"action": "type", "text": "café"},
		{"action": "cursor_position"}
	]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp api.ActionsResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 4 || resp.Screenshot != nil {
		t.Fatalf("results %+v, screenshot %v: want 4 results, no screenshot", resp.Results, resp.Screenshot != nil)
	}
	for i, r := range resp.Results {
		if r.Status != "ok" || r.Index != i {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if c := resp.Results[3].Cursor; c == nil || *c != (api.Point{X: 10, Y: 20}) {
		t.Errorf("cursor %+v, want 10,20", c)
	}
	frames := h.frames()
	if len(frames) < 3 || frames[0][0] != (desktop.InputEvent{Kind: desktop.InputMove, X: 10, Y: 20}) {
		t.Fatalf("frames %v: want a move to 10,20 first", frames)
	}
	if got := h.guest.Typed(); len(got) != 1 || got[0] != "café" {
		t.Errorf("guest typed %q, want [café]", got)
	}
}

func TestActionsDisplaySpaceAndScreenshot(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("POST", h.path("/actions"), `{"actions": [{"action": "click", "x": 320, "y": 200}, {"action": "cursor_position"}],
		"screenshot": true, "settle_ms": 20, "timeout_ms": 1000, "display_width": 640, "display_height": 400}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp api.ActionsResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	wx, wy := screenshot.ScaleTo(1280, 800, 640, 400).ToNative(320, 200)
	if f := h.frames()[0][0]; f.X != wx || f.Y != wy {
		t.Errorf("click reached native %d,%d, want %d,%d", f.X, f.Y, wx, wy)
	}
	if c := resp.Results[1].Cursor; c == nil || *c != (api.Point{X: 320, Y: 200}) {
		t.Errorf("cursor %+v, want 320,200 in the declared space", c)
	}
	s := resp.Screenshot
	if s == nil {
		t.Fatal("no screenshot")
	}
	img, err := png.Decode(bytes.NewReader(s.Data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 400 || s.Width != 640 || s.Height != 400 || s.ScreenWidth != 1280 {
		t.Errorf("screenshot %v (%dx%d of %d), want 640x400 of 1280", b, s.Width, s.Height, s.ScreenWidth)
	}
	if s.Settle == nil || !s.Settle.Settled || s.Settle.QuietMs != 20 {
		t.Errorf("settle %+v, want settled with a 20 ms quiet period", s.Settle)
	}
}

func TestActionsZoomAndMidBatchScreenshot(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("POST", h.path("/actions"), `{"actions": [{"action": "screenshot"}, {"action": "zoom", "region": [0, 0, 320, 100]}],
		"settle_ms": 0, "format": "jpeg", "quality": 60}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp api.ActionsResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	mid := resp.Results[0].Screenshot
	if mid == nil || mid.Width != 1280 || mid.MediaType != "image/jpeg" {
		t.Fatalf("mid-batch screenshot %+v", mid)
	}
	z := resp.Screenshot
	// A zoom fills the display (native here) with its region, aspect kept.
	if z == nil || z.Width != 1280 || z.Height != 400 || fmt.Sprint(z.Region) != "[0 0 320 100]" || z.Settle != nil {
		t.Fatalf("zoom %+v, want 1280x400 of region 0,0,320,100 without settling", z)
	}
}

func TestActionsSettleSeesChanges(t *testing.T) {
	h := newActHarness(t)
	// Each poke repaints, as a guest does while it redraws: the screen
	// never settles and the deadline takes the picture.
	n := 0
	h.src.OnPoke(func() { n++; h.paint(actColor(n)) })
	status, body := h.do("POST", h.path("/actions"), `{"actions": [{"action": "screenshot"}], "settle_ms": 200, "timeout_ms": 300}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp api.ActionsResponse
	json.Unmarshal(body, &resp)
	if st := resp.Screenshot.Settle; st == nil || st.Settled || st.Changes == 0 || st.WaitedMs < 300 {
		t.Errorf("settle %+v, want the deadline after changes", st)
	}
}

func TestActionsRefusedByState(t *testing.T) {
	h := newActHarness(t)
	ctx := t.Context()
	batch := `{"actions": [{"action": "click", "x": 1, "y": 1}]}`

	if status, body := h.do("POST", "/v1/desktops/d-nope/actions", batch); status != http.StatusNotFound {
		t.Errorf("unknown desktop: %d %s", status, body)
	}

	if _, err := h.mgr.SetControl(h.id, desktop.ControlPerson, "ada"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/actions", "/computer/anthropic", "/computer/openai"} {
		body := batch
		switch p {
		case "/computer/anthropic":
			body = `{"action": "left_click", "coordinate": [1, 1]}`
		case "/computer/openai":
			body = `{"type": "computer_call", "call_id": "c1", "action": {"type": "click", "x": 1, "y": 1, "button": "left"}}`
		}
		status, data := h.do("POST", h.path(p), body)
		code, _, _, msg := actError(t, data)
		if status != http.StatusConflict || code != "person_in_control" || !strings.Contains(msg, "ada") {
			t.Errorf("%s during person control: %d %s %q", p, status, code, msg)
		}
	}
	// Screenshots still work for the person's agent to watch.
	if status, _ := h.do("GET", h.path("/screenshot"), ""); status != http.StatusOK {
		t.Errorf("screenshot during person control: %d", status)
	}
	if _, err := h.mgr.SetControl(h.id, desktop.ControlAgent, ""); err != nil {
		t.Fatal(err)
	}

	if _, err := h.mgr.Pause(ctx, h.id); err != nil {
		t.Fatal(err)
	}
	status, data := h.do("POST", h.path("/actions"), batch)
	code, _, state, _ := actError(t, data)
	if status != http.StatusConflict || code != "illegal_state" || state != "paused" {
		t.Errorf("paused: %d %s state %q", status, code, state)
	}
	if n := len(h.frames()); n != 0 {
		t.Errorf("%d frames sent to a refused desktop", n)
	}
}

func TestActionsFailureReportsResults(t *testing.T) {
	h := newActHarness(t)
	h.guest.Typing = func(context.Context, string) error {
		return fmt.Errorf("%w: guest agent timeout", desktop.ErrUnavailable)
	}
	status, body := h.do("POST", h.path("/actions"), `{"actions": [{"action": "click", "x": 1, "y": 1}, {"action": "type", "text": "日本"}, {"action": "key", "chord": "Return"}]}`)
	if status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504: %s", status, body)
	}
	var resp api.ActionsResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range resp.Results {
		got = append(got, r.Status)
	}
	if fmt.Sprint(got) != "[ok error skipped]" || resp.Error == nil || resp.Error.Code != "unavailable" {
		t.Errorf("statuses %v, error %+v", got, resp.Error)
	}

	// An action failing for its own reason is 422.
	h2 := newActHarness(t)
	status, body = h2.do("POST", h2.path("/actions"), `{"actions": [{"action": "cursor_position"}]}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "action_failed") {
		t.Errorf("cursor_position before any pointer action: %d %s", status, body)
	}
	// ... unless the guest can say where the pointer is.
	h2.guest.SetPointer(5, 6)
	status, body = h2.do("POST", h2.path("/actions"), `{"actions": [{"action": "cursor_position"}]}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"cursor":{"x":5,"y":6}`) {
		t.Errorf("cursor_position located through the guest: %d %s", status, body)
	}
}

func TestActionsNeedAControlToken(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("POST", h.path("/tokens"), `{"role": "view"}`)
	if status != http.StatusCreated {
		t.Fatalf("issue token: %d %s", status, body)
	}
	var tok struct{ Token string }
	json.Unmarshal(body, &tok)
	for _, p := range []string{"/actions", "/computer/anthropic", "/computer/openai", "/exec", "/clipboard"} {
		method := "POST"
		if p == "/clipboard" {
			method = "PUT"
		}
		req, _ := http.NewRequest(method, h.srv.URL+h.path(p), strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a view token: %d, want 403", p, resp.StatusCode)
		}
	}
}
