package browsertool_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/input"
)

// Every member decodes a body of its table in the reference, with the
// defaults the docs state filled in.
func TestDecodeEveryMember(t *testing.T) {
	ref := browsertool.Target{Ref: "ref_3"}
	cases := []struct {
		member, body string
		want         browsertool.Call
	}{
		{"navigate", `{"url": "https://example.com/docs"}`, browsertool.Call{URL: "https://example.com/docs"}},
		{"navigate", `{"url": "example.com/docs", "tab_id": "tab-2"}`, browsertool.Call{URL: "https://example.com/docs", TabID: "tab-2"}},
		{"navigate", `{"url": "127.0.0.1:8080/form"}`, browsertool.Call{URL: "https://127.0.0.1:8080/form"}},
		{"navigate", `{"url": "back"}`, browsertool.Call{URL: "back"}},
		{"screenshot", `{}`, browsertool.Call{}},
		{"screenshot", ``, browsertool.Call{}},
		{"zoom", `{"region": [0, 0, 640, 400]}`, browsertool.Call{Region: [4]int{0, 0, 640, 400}}},
		{"left_click", `{"target": {"type": "ref", "ref": "ref_3"}}`, browsertool.Call{Target: ref}},
		{"right_click", `{"target": {"type": "coordinate", "x": 10, "y": 20}}`, browsertool.Call{Target: browsertool.Target{X: 10, Y: 20}}},
		{"middle_click", `{"target": {"type": "ref", "ref": "ref_3"}, "modifiers": "ctrl+shift"}`, browsertool.Call{Target: ref, Modifiers: []string{"ctrl", "shift"}}},
		{"double_click", `{"target": {"type": "ref", "ref": "ref_3"}, "modifiers": "cmd+alt"}`, browsertool.Call{Target: ref, Modifiers: []string{"cmd", "alt"}}},
		{"triple_click", `{"target": {"type": "ref", "ref": "ref_3"}}`, browsertool.Call{Target: ref}},
		{"hover", `{"target": {"type": "ref", "ref": "ref_3"}}`, browsertool.Call{Target: ref}},
		{"left_click_drag", `{"from": {"type": "coordinate", "x": 1, "y": 2}, "target": {"type": "coordinate", "x": 30, "y": 40}}`, browsertool.Call{From: browsertool.Target{X: 1, Y: 2}, Target: browsertool.Target{X: 30, Y: 40}}},
		{"left_mouse_down", `{"target": {"type": "coordinate", "x": 5, "y": 6}}`, browsertool.Call{Target: browsertool.Target{X: 5, Y: 6}}},
		{"left_mouse_up", `{"target": {"type": "coordinate", "x": 5, "y": 6}}`, browsertool.Call{Target: browsertool.Target{X: 5, Y: 6}}},
		{"mouse_move", `{"target": {"type": "coordinate", "x": 5, "y": 6}}`, browsertool.Call{Target: browsertool.Target{X: 5, Y: 6}}},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "down"}`, browsertool.Call{Target: browsertool.Target{X: 5, Y: 6}, Direction: "down", Amount: 3}},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "left", "scroll_amount": 10}`, browsertool.Call{Target: browsertool.Target{X: 5, Y: 6}, Direction: "left", Amount: 10}},
		{"scroll_to", `{"target": {"type": "ref", "ref": "ref_3"}}`, browsertool.Call{Target: ref}},
		{"type", `{"text": "install"}`, browsertool.Call{Text: "install"}},
		{"key", `{"text": "Enter"}`, browsertool.Call{Text: "Enter", Repeat: 1}},
		{"key", `{"text": "Backspace Backspace Delete", "repeat": 100}`, browsertool.Call{Text: "Backspace Backspace Delete", Repeat: 100}},
		{"key", `{"text": "ctrl+a"}`, browsertool.Call{Text: "ctrl+a", Repeat: 1}},
		{"hold_key", `{"text": "shift", "duration": 1.5}`, browsertool.Call{Text: "shift", Seconds: 1.5}},
		{"wait", `{"duration": 0}`, browsertool.Call{}},
		{"wait", `{"duration": 30}`, browsertool.Call{Seconds: 30}},
		{"read_page", `{}`, browsertool.Call{Depth: 15}},
		{"read_page", `{"filter": "interactive", "depth": 3, "ref": "ref_9"}`, browsertool.Call{Filter: "interactive", Depth: 3, Ref: "ref_9"}},
		{"find", `{"query": "the search box"}`, browsertool.Call{Query: "the search box"}},
		{"get_page_text", `{"tab_id": "tab-1"}`, browsertool.Call{TabID: "tab-1"}},
		{"form_input", `{"target": {"type": "ref", "ref": "ref_3"}, "value": true}`, browsertool.Call{Target: ref, Value: true}},
		{"form_input", `{"target": {"type": "ref", "ref": "ref_3"}, "value": 42}`, browsertool.Call{Target: ref, Value: 42.0}},
		{"form_input", `{"target": {"type": "ref", "ref": "ref_3"}, "value": "Blue"}`, browsertool.Call{Target: ref, Value: "Blue"}},
		{"file_upload", `{"target": {"type": "ref", "ref": "ref_12"}, "paths": ["/home/user/uploads/summary.pdf"], "tab_id": "tab-2"}`, browsertool.Call{Target: browsertool.Target{Ref: "ref_12"}, Paths: []string{"/home/user/uploads/summary.pdf"}, TabID: "tab-2"}},
		{"file_upload", `{"target": {"type": "ref", "ref": "ref_12"}, "document_ids": ["doc-1"]}`, browsertool.Call{Target: browsertool.Target{Ref: "ref_12"}, DocumentIDs: []string{"doc-1"}}},
		{"read_console", `{}`, browsertool.Call{}},
		{"read_network", `{}`, browsertool.Call{}},
		{"javascript_exec", `{"text": "document.title"}`, browsertool.Call{Text: "document.title"}},
		{"new_tab", `{}`, browsertool.Call{}},
		{"list_tabs", `{}`, browsertool.Call{}},
		{"switch_tab", `{"tab_id": "tab-2"}`, browsertool.Call{TabID: "tab-2"}},
		{"close_tab", `{"tab_id": "tab-2"}`, browsertool.Call{TabID: "tab-2"}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		got, err := browsertool.Decode(c.member, []byte(c.body))
		if err != nil {
			t.Errorf("%s %s: %v", c.member, c.body, err)
			continue
		}
		c.want.Member = c.member
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.member, c.body, got, c.want)
		}
		covered[c.member] = true
	}
	for _, m := range browsertool.Members() {
		if !covered[m] {
			t.Errorf("no valid body for %s", m)
		}
	}
	if n := len(browsertool.Members()); n != 31 {
		t.Errorf("%d members, want the reference's 31", n)
	}
}

// A body that breaks a member's schema or a stated bound is an InputError
// in the SDK's words, naming the field.
func TestDecodeRefusals(t *testing.T) {
	cases := []struct {
		member, body, field, problem string
	}{
		{"navigate", `{}`, "url", "required"},
		{"navigate", `{"url": 7}`, "url", "must be a string"},
		{"navigate", `{"url": ""}`, "url", "a URL, or back"},
		{"navigate", `{"url": "https://"}`, "url", "has no host"},
		{"screenshot", `{"full": true}`, "full", "not a field of screenshot"},
		{"new_tab", `{"url": "x"}`, "url", "new_tab takes no fields"},
		{"new_tab", `{"tab_id": "tab-1"}`, "tab_id", "new_tab takes no fields"},
		{"zoom", `{"region": [0, 0, 640]}`, "region", "got 3 numbers"},
		{"zoom", `{"region": [10, 0, 5, 400]}`, "region", "x1 must be greater than x0"},
		{"zoom", `{"region": [0, -1, 5, 400]}`, "region[1]", "at least 0"},
		{"zoom", `{"region": [0, 0.5, 5, 400]}`, "region[1]", "whole number"},
		{"left_click", `{}`, "target", "required"},
		{"left_click", `{"target": {"type": "coordinate", "x": "1", "y": 2}}`, "target", "whole viewport pixels"},
		{"zoom", `{"region": [0, "0", 5, 400]}`, "region[1]", "whole number"},
		{"left_click", `{"target": {"type": "ref", "ref": "3"}}`, "target.ref", "not an element ref"},
		{"left_click", `{"target": {"type": "ref", "ref": "ref_3", "x": 1}}`, "target", "and nothing else"},
		{"left_click", `{"target": {"type": "coordinate", "x": 1}}`, "target", "and nothing else"},
		{"left_click", `{"target": {"type": "coordinate", "x": -1, "y": 2}}`, "target", "at least 0"},
		{"left_click", `{"target": {"type": "point", "x": 1, "y": 2}}`, "target.type", "not a target type"},
		{"left_click", `{"target": {"type": "ref", "ref": "ref_3"}, "modifiers": "ctrl+q"}`, "modifiers", "not a modifier key"},
		{"left_click", `{"target": {"type": "ref", "ref": "ref_3"}, "modifiers": ["ctrl"]}`, "modifiers", "must be a string"},
		{"left_click", `{"target": {"type": "ref", "ref": "ref_3"}, "button": "left"}`, "button", "not a field of left_click"},
		{"left_click_drag", `{"from": {"type": "ref", "ref": "ref_1"}, "target": {"type": "coordinate", "x": 3, "y": 4}}`, "from.type", "coordinate target only"},
		{"mouse_move", `{"target": {"type": "ref", "ref": "ref_1"}}`, "target.type", "coordinate target only"},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}}`, "scroll_direction", "required"},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "sideways"}`, "scroll_direction", "not one of up, down, left, right"},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "up", "scroll_amount": 0}`, "scroll_amount", "from 1 to 10, got 0"},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "up", "scroll_amount": 11}`, "scroll_amount", "from 1 to 10, got 11"},
		{"scroll", `{"target": {"type": "coordinate", "x": 5, "y": 6}, "scroll_direction": "up", "scroll_amount": 2.5}`, "scroll_amount", "must be an integer"},
		{"scroll_to", `{"target": {"type": "coordinate", "x": 5, "y": 6}}`, "target.type", "element ref target only"},
		{"type", `{"text": ""}`, "text", "must not be empty"},
		{"type", `{"text": null}`, "text", "not null"},
		{"key", `{"text": "Enter", "repeat": 0}`, "repeat", "from 1 to 100"},
		{"key", `{"text": "Enter", "repeat": 101}`, "repeat", "from 1 to 100"},
		{"key", `{"text": "ctrl+nosuchkey"}`, "text", "nosuchkey"},
		{"hold_key", `{"text": "shift"}`, "duration", "required"},
		{"hold_key", `{"text": "shift", "duration": 31}`, "duration", "from 0 to 30"},
		{"wait", `{"duration": -1}`, "duration", "from 0 to 30"},
		{"wait", `{"duration": "2"}`, "duration", "a number of seconds"},
		{"read_page", `{"filter": "visible"}`, "filter", "not one of interactive, all"},
		{"read_page", `{"depth": 0}`, "depth", "at least 1"},
		{"read_page", `{"ref": "body"}`, "ref", "not an element ref"},
		{"find", `{"query": " "}`, "query", "must not be empty"},
		{"form_input", `{"target": {"type": "ref", "ref": "ref_3"}}`, "value", "required"},
		{"form_input", `{"target": {"type": "ref", "ref": "ref_3"}, "value": ["a"]}`, "value", "a string, a number or a boolean"},
		{"file_upload", `{"target": {"type": "ref", "ref": "ref_3"}}`, "paths", "at least one file"},
		{"file_upload", `{"target": {"type": "ref", "ref": "ref_3"}, "paths": [""]}`, "paths[0]", "must not be empty"},
		{"javascript_exec", `{"text": ""}`, "text", "must not be empty"},
		{"switch_tab", `{}`, "tab_id", "required"},
		{"switch_tab", `{"tab_id": ""}`, "tab_id", "an open tab"},
		{"close_tab", `{"tab_id": "tab\n1"}`, "tab_id", "control character"},
		{"close_tab", `{"tab_id": "` + strings.Repeat("t", 4097) + `"}`, "tab_id", "more than 4096"},
		{"get_page_text", `{"tab_id": 3}`, "tab_id", "must be a string"},
		{"get_page_text", `[]`, "", "a JSON object"},
		{"open_url", `{}`, "", "not a member of browser_toolset_20260801"},
	}
	for _, c := range cases {
		_, err := browsertool.Decode(c.member, []byte(c.body))
		var ie *browsertool.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s %s: %v, want an InputError", c.member, c.body, err)
			continue
		}
		if !errors.Is(err, input.ErrInvalid) {
			t.Errorf("%s: %v does not match input.ErrInvalid", c.member, err)
		}
		if ie.Field != c.field || !strings.Contains(ie.Problem, c.problem) {
			t.Errorf("%s %s: field %q problem %q, want field %q and %q", c.member, c.body, ie.Field, ie.Problem, c.field, c.problem)
		}
		if want := "invalid input for browser member '" + c.member + "': "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %q does not start with the SDK's %q", c.member, err, want)
		}
	}
}

// navigate refuses schemes other than http and https in the docs' words,
// and tells a host and port from a scheme.
func TestNavigationURL(t *testing.T) {
	for _, s := range []string{"javascript:alert(1)", "file:///etc/passwd", "chrome://settings", "mailto:a@b.c", "data:text/html,hi"} {
		if _, err := browsertool.NavigationURL(s); !errors.Is(err, browsertool.ErrNavigationRefused) {
			t.Errorf("%s: %v, want the refusal", s, err)
		}
		_, err := browsertool.Decode("navigate", []byte(`{"url": "`+s+`"}`))
		if !errors.Is(err, browsertool.ErrNavigationRefused) {
			t.Errorf("Decode %s: %v, want the refusal", s, err)
		}
	}
	for in, want := range map[string]string{
		"localhost:8080":           "https://localhost:8080",
		"http://127.0.0.1:9/a?b=c": "http://127.0.0.1:9/a?b=c",
		"example.com":              "https://example.com",
		"reload":                   "reload",
		"forward":                  "forward",
	} {
		if got, err := browsertool.NavigationURL(in); err != nil || got != want {
			t.Errorf("%s: %q, %v, want %q", in, got, err, want)
		}
	}
}
