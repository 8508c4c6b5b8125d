package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A turn the toolset cannot read, or a toolset entry the Messages API
// would refuse, fails the request with 400 naming the field, before any
// call runs; a desktop whose image has no Chromium is a conflict naming
// the flavor to use, not a turn of failed calls.
func TestBrowserTurnErrors(t *testing.T) {
	h := newActHarness(t)
	use := `{"type":"tool_use","id":"a","name":"screenshot","toolset_name":"browser","input":{}}`
	cases := []struct{ name, body, field string }{
		{"not a turn", `{"content": 3}`, "content"},
		{"no browser call", `[{"type":"tool_use","id":"a","name":"screenshot","input":{}}]`, "content"},
		{"a call without its id", `[{"type":"tool_use","name":"screenshot","toolset_name":"browser","input":{}}]`, "content[0].id"},
		{"a member that is not one", `{"tools":[{"type":"browser_toolset_20260801","configs":{"fly":{"enabled":true}}}],"content":[` + use + `]}`, "tools[0].configs.fly"},
		{"a named entry", `{"tools":[{"type":"browser_toolset_20260801","name":"browser"}],"content":[` + use + `]}`, "tools[0].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do("POST", h.path("/browser/anthropic"), c.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, body)
			}
			var resp struct {
				Error struct{ Field, Message string }
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resp.Error.Field+" "+resp.Error.Message, c.field) {
				t.Errorf("error %+v, want it to name %s", resp.Error, c.field)
			}
		})
	}
	status, body := h.do("POST", h.path("/browser/anthropic"), "["+use+"]")
	if status != http.StatusConflict || !strings.Contains(string(body), "create it from a snapshot of the browser image") {
		t.Errorf("a desktop without Chromium: %d %s, want 409 naming the browser flavor", status, body)
	}
}
