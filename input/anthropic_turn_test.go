package input

import (
	"errors"
	"strings"
	"testing"
)

const turnBody = `{"role": "assistant", "content": [
  {"type": "thinking", "thinking": "click then type"},
  {"type": "text", "text": "I will click the field."},
  {"type": "tool_use", "id": "t1", "name": "left_click", "input": {"coordinate": [10, 20]}},
  {"type": "tool_use", "id": "b1", "name": "bash", "input": {"command": "ls"}},
  {"type": "tool_use", "id": "t2", "name": "type", "input": {"text": "hi"}},
  {"type": "tool_use", "id": "t3", "name": "computer", "input": {"action": "key", "text": "Return"}}
]}`

func TestDecodeAnthropicTurn(t *testing.T) {
	for _, body := range []string{turnBody, turnBody[strings.Index(turnBody, "[") : strings.LastIndex(turnBody, "]")+1]} {
		if !IsAnthropicTurn([]byte(body)) {
			t.Fatalf("not seen as a turn: %.40s", body)
		}
		uses, others, err := DecodeAnthropicTurn([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range uses {
			ids = append(ids, u.ID)
		}
		if strings.Join(ids, ",") != "t1,t2,t3" || len(others) != 1 || others[0] != "bash" {
			t.Errorf("uses %v others %v", ids, others)
		}
	}
	for _, single := range []string{`{"action": "left_click", "coordinate": [1, 2]}`, `{"type": "tool_use", "id": "x", "name": "computer", "input": {"action": "screenshot"}}`} {
		if IsAnthropicTurn([]byte(single)) {
			t.Errorf("%s taken for a turn", single)
		}
	}
	for body, want := range map[string]string{
		`{"content": "text"}`:                    "content",
		`[{"type": "text", "text": "no tools"}]`: "no computer tool_use",
		`[{"type": "tool_use", "name": "left_click", "input": {"coordinate": [1, 2]}}]`: "content[0].id",
		`[3]`: "content[0]",
	} {
		_, _, err := DecodeAnthropicTurn([]byte(body))
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Field+": "+ve.Reason, want) {
			t.Errorf("%s: got %v, want a validation error about %s", body, err, want)
		}
	}
}

// A turn runs in order and stops at the first failure, of decoding or of
// running; every later call answers is_error unrun.
func TestRunAnthropicTurnStopsAtFirstFailure(t *testing.T) {
	uses, _, err := DecodeAnthropicTurn([]byte(`[
	  {"type": "tool_use", "id": "a", "name": "left_click", "input": {"coordinate": [10, 20]}},
	  {"type": "tool_use", "id": "b", "name": "left_click", "input": {"coordinate": "nowhere"}},
	  {"type": "tool_use", "id": "c", "name": "type", "input": {"text": "never"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	run := func(call AnthropicCall) (BatchResult, *Image, []string, error) {
		ran = append(ran, call.Action)
		return BatchResult{}, &Image{MediaType: "image/png", Data: []byte("png")}, []string{"keys sent unconfirmed"}, nil
	}
	results, failed := RunAnthropicTurn(uses, nil, run)
	if failed != 1 || len(results) != 3 || strings.Join(ran, ",") != "left_click" {
		t.Fatalf("failed %d, %d results, ran %v", failed, len(results), ran)
	}
	if r := results[0]; r.IsError || r.ToolUseID != "a" || r.Content[0].Type != "image" || r.Content[1].Text != "Note: keys sent unconfirmed" {
		t.Errorf("first result %+v", r)
	}
	if r := results[1]; !r.IsError || r.ToolUseID != "b" || !strings.Contains(r.Content[0].Text, "coordinate") {
		t.Errorf("second result %+v: want is_error naming coordinate", r)
	}
	if r := results[2]; !r.IsError || r.ToolUseID != "c" || r.Content[0].Text != AnthropicNotExecuted {
		t.Errorf("third result %+v", r)
	}

	// A failure while running stops the rest the same way.
	uses, _, _ = DecodeAnthropicTurn([]byte(`[
	  {"type": "tool_use", "id": "a", "name": "key", "input": {"text": "Return"}},
	  {"type": "tool_use", "id": "b", "name": "key", "input": {"text": "Tab"}}]`))
	ran = nil
	results, failed = RunAnthropicTurn(uses, nil, func(call AnthropicCall) (BatchResult, *Image, []string, error) {
		ran = append(ran, call.Action)
		return BatchResult{}, nil, nil, errors.New("a person took control")
	})
	if failed != 0 || len(ran) != 1 || !results[0].IsError || results[1].Content[0].Text != AnthropicNotExecuted {
		t.Errorf("failed %d, ran %v, results %+v", failed, ran, results)
	}
}

func TestAnthropicToolsetConfigs(t *testing.T) {
	body := []byte(`{"role": "assistant", "content": [
	  {"type": "tool_use", "id": "a", "name": "left_click", "input": {"coordinate": [10, 20]}},
	  {"type": "tool_use", "id": "b", "name": "zoom", "input": {"region": [0, 0, 10, 10]}},
	  {"type": "tool_use", "id": "c", "name": "type", "input": {"text": "never"}}],
	  "tools": [{"type": "bash_20250124", "name": "bash"},
	            {"type": "computer_toolset_20260801", "configs": {"zoom": {"enabled": false}, "wait": {"enabled": true}}}]}`)
	disabled, err := DecodeAnthropicToolset(body)
	if err != nil || len(disabled) != 1 || !disabled["zoom"] {
		t.Fatalf("disabled %v, %v: want zoom alone", disabled, err)
	}
	uses, _, err := DecodeAnthropicTurn(body)
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	results, failed := RunAnthropicTurn(uses, disabled, func(call AnthropicCall) (BatchResult, *Image, []string, error) {
		ran = append(ran, call.Action)
		return BatchResult{}, nil, nil, nil
	})
	if failed != 1 || strings.Join(ran, ",") != "left_click" || !strings.Contains(results[1].Content[0].Text, "zoom is turned off") || results[2].Content[0].Text != AnthropicNotExecuted {
		t.Errorf("failed %d, ran %v, results %+v", failed, ran, results)
	}

	for _, c := range []struct{ body, field string }{
		{`{"content": [], "tools": [{"type": "computer_toolset_20260801", "configs": {"teleport": {"enabled": false}}}]}`, "tools[0].configs.teleport"},
		{`{"content": [], "tools": [{"type": "computer_toolset_20260801", "configs": {"zoom": {"enabled": false, "scale": 2}}}]}`, "tools[0].configs.zoom"},
		{`{"content": [], "tools": [{"type": "computer_toolset_20260801", "configs": {"zoom": false}}]}`, "tools[0].configs.zoom"},
		{`{"content": [], "tools": "computer"}`, "tools"},
		{`{"content": [], "tools": [7]}`, "tools[0]"},
	} {
		_, err := DecodeAnthropicToolset([]byte(c.body))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want an error on %s", c.body, err, c.field)
		}
	}
	for _, none := range []string{`[{"type": "text", "text": "hi"}]`, `{"content": []}`, `{"content": [], "tools": [{"type": "computer_toolset_20260801"}]}`} {
		if d, err := DecodeAnthropicToolset([]byte(none)); err != nil || len(d) != 0 {
			t.Errorf("%s: %v %v, want nothing turned off", none, d, err)
		}
	}
}

func FuzzDecodeAnthropicToolset(f *testing.F) {
	f.Add([]byte(`{"content": [], "tools": [{"type": "computer_toolset_20260801", "configs": {"zoom": {"enabled": false}}}]}`))
	f.Add([]byte(`[{"type": "tool_use"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		disabled, err := DecodeAnthropicToolset(body)
		if err != nil {
			return
		}
		for m := range disabled {
			if !IsAnthropicComputerTool(m) || m == "computer" {
				t.Fatalf("%q turned off: not a member", m)
			}
		}
	})
}
