package browsertool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/warmdesk/warmdesk/browsertool"
)

// Decode never panics, and what it accepts it accepts again the same.
func FuzzDecode(f *testing.F) {
	f.Add("left_click", `{"target": {"type": "ref", "ref": "ref_3"}, "modifiers": "ctrl+shift"}`)
	f.Add("zoom", `{"region": [0, 0, 640, 400]}`)
	f.Add("navigate", `{"url": "example.com:8080/x"}`)
	f.Add("key", `{"text": "ctrl+a Backspace", "repeat": 3}`)
	f.Add("form_input", `{"target": {"type": "ref", "ref": "ref_1"}, "value": 1e400}`)
	f.Add("file_upload", `{"target": {"type": "ref", "ref": "ref_1"}, "paths": ["/a"]}`)
	f.Fuzz(func(t *testing.T, member, body string) {
		c, err := browsertool.Decode(member, []byte(body))
		if err != nil {
			return
		}
		if c.Member != member {
			t.Fatalf("member %q decoded as %q", member, c.Member)
		}
		if _, err := browsertool.Decode(member, []byte(body)); err != nil {
			t.Fatalf("accepted once, refused again: %v", err)
		}
	})
}

// A turn of any blocks answers every browser call exactly once, in order,
// and every answer is a well-formed result.
func FuzzTurn(f *testing.F) {
	f.Add(`[{"type":"tool_use","id":"a","name":"wait","toolset_name":"browser","input":{"duration":1}},{"type":"tool_use","id":"b","name":"key","toolset_name":"browser","input":{"text":"Enter"}}]`)
	f.Add(`{"content":[{"type":"tool_use","id":"a","name":"navigate","toolset_name":"browser","input":{"url":"x"}}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		uses, _, err := browsertool.DecodeTurn([]byte(body))
		if err != nil {
			return
		}
		results, failed := browsertool.RunTurn(context.Background(), uses, browsertool.DefaultToolset(), &script{})
		if len(results) != len(uses) {
			t.Fatalf("%d results for %d calls", len(results), len(uses))
		}
		for i, r := range results {
			if r.ToolUseID != uses[i].ID || r.ToolsetName != "browser" || len(r.Content) == 0 {
				t.Fatalf("result %d: %+v", i, r)
			}
			if r.IsError != (failed >= 0 && i >= failed) {
				t.Fatalf("result %d: is_error %v with the turn failed at %d", i, r.IsError, failed)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// DecodeToolset never panics.
func FuzzDecodeToolset(f *testing.F) {
	f.Add(`[{"type":"browser_toolset_20260801","configs":{"read_console":{"enabled":true}}}]`)
	f.Fuzz(func(t *testing.T, body string) {
		var entries []json.RawMessage
		if json.Unmarshal([]byte(body), &entries) != nil {
			return
		}
		browsertool.DecodeToolset(entries)
	})
}
