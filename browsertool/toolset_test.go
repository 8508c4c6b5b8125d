package browsertool_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/input"
)

func tools(t *testing.T, s string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// configs turn members on and off as the docs say; the four optional
// members are off unless enabled; other tools' entries are skipped.
func TestToolsetConfigs(t *testing.T) {
	ts, err := browsertool.DecodeToolset(tools(t, `[{"type":"computer_toolset_20260801"},{"type":"browser_toolset_20260801","configs":{"read_console":{"enabled":true},"left_mouse_down":{"enabled":false}},"cache_control":{"type":"ephemeral"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	for member, want := range map[string]bool{"read_console": true, "left_mouse_down": false, "navigate": true, "javascript_exec": false, "file_upload": false} {
		if ts.Enabled(member) != want {
			t.Errorf("%s enabled = %v, want %v", member, !want, want)
		}
	}
	for _, body := range []string{`[]`, `[{"type":"browser_toolset_20260801"}]`, `[{"type":"browser_toolset_20260801","configs":null}]`, `[{"type":"browser_toolset_20260801","configs":{}}]`} {
		ts, err := browsertool.DecodeToolset(tools(t, body))
		if err != nil || !ts.Enabled("navigate") || ts.Enabled("read_network") {
			t.Errorf("%s: the defaults, got %v", body, err)
		}
	}
	var zero browsertool.Toolset
	if !zero.Enabled("screenshot") || zero.Enabled("javascript_exec") || zero.Enabled("nope") {
		t.Error("the zero Toolset is not the defaults")
	}
}

// What the Messages API refuses in the entry is refused, naming the field.
func TestToolsetRefusals(t *testing.T) {
	every := make(map[string]any)
	for _, m := range browsertool.Members() {
		every[m] = map[string]bool{"enabled": false}
	}
	none, _ := json.Marshal(every)
	cases := map[string]string{
		`[{"type":"browser_toolset_20260801","name":"browser"}]`:                                                 "tools[0].name",
		`[{"type":"browser_toolset_20260801","defer_loading":true}]`:                                             "tools[0].defer_loading",
		`[{"type":"browser_toolset_20260801","strict":true}]`:                                                    "tools[0].strict",
		`[{"type":"browser_toolset_20260801","configs":{"open_url":{"enabled":true}}}]`:                          "tools[0].configs.open_url",
		`[{"type":"browser_toolset_20260801","configs":{"zoom":{"enabled":true,"strict":true}}}]`:                "tools[0].configs.zoom",
		`[{"type":"browser_toolset_20260801","configs":{"zoom":{"defer_loading":true}}}]`:                        "defer_loading",
		`[{"type":"browser_toolset_20260801","configs":` + string(none) + `}]`:                                   "leaves no member enabled",
		`[{"type":"browser_toolset_20260801"},{"type":"browser_toolset_20260801"}]`:                              "tools[1]",
		`[{"type":"browser_toolset_20260801","configs":[1]}]`:                                                    "tools[0].configs",
		`[{"type":"browser_toolset_20260801","configs":{"read_console":{"enabled":true,"defer_loading":true}}}]`: "defer_loading",
	}
	for body, field := range cases {
		_, err := browsertool.DecodeToolset(tools(t, body))
		if err == nil || !strings.Contains(err.Error(), field) || !errors.Is(err, input.ErrInvalid) {
			t.Errorf("%s: %v, want an error naming %s", body, err, field)
		}
	}
	// Every enabled member sharing defer_loading is fine.
	all := map[string]any{}
	for _, m := range browsertool.Members() {
		all[m] = map[string]bool{"defer_loading": true}
	}
	b, _ := json.Marshal(map[string]any{"type": "browser_toolset_20260801", "configs": all})
	if _, err := browsertool.DecodeToolset([]json.RawMessage{b}); err != nil {
		t.Errorf("every member deferred: %v", err)
	}
}
