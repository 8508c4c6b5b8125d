package input

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// openAICases are computer_call items in the shapes of the openai-python
// types (computer_use_preview's single action, the GA tool's actions[]),
// with their canonical translation. FuzzDecodeOpenAI is seeded from them.
var openAICases = []struct {
	name string
	body string
	want Batch
}{
	{"click", `{"type":"computer_call","id":"cu_1","call_id":"call_1","action":{"type":"click","button":"left","x":100,"y":200},"pending_safety_checks":[],"status":"completed"}`,
		Batch{{Kind: KindClick, At: &Point{100, 200}, Button: ButtonLeft, Count: 1}}},
	{"click wheel", `{"type":"computer_call","call_id":"c","action":{"type":"click","button":"wheel","x":1,"y":2}}`,
		Batch{{Kind: KindClick, At: &Point{1, 2}, Button: ButtonMiddle, Count: 1}}},
	{"click back", `{"call_id":"c","action":{"type":"click","button":"back","x":1,"y":2}}`,
		Batch{{Kind: KindClick, At: &Point{1, 2}, Button: ButtonBack, Count: 1}}},
	{"click forward with keys", `{"call_id":"c","action":{"type":"click","button":"forward","x":1,"y":2,"keys":["SHIFT"]}}`,
		Batch{{Kind: KindClick, At: &Point{1, 2}, Button: ButtonForward, Count: 1, Modifiers: []string{"SHIFT"}}}},
	{"double_click", `{"call_id":"c","action":{"type":"double_click","x":5,"y":6}}`,
		Batch{{Kind: KindClick, At: &Point{5, 6}, Button: ButtonLeft, Count: 2}}},
	{"drag", `{"call_id":"c","action":{"type":"drag","path":[{"x":100,"y":200},{"x":200,"y":300}]}}`,
		Batch{{Kind: KindDrag, Button: ButtonLeft, Path: []Point{{100, 200}, {200, 300}}}}},
	{"drag pairs", `{"call_id":"c","action":{"type":"drag","path":[[1,2],[3,4]],"keys":["CTRL"]}}`,
		Batch{{Kind: KindDrag, Button: ButtonLeft, Path: []Point{{1, 2}, {3, 4}}, Modifiers: []string{"CTRL"}}}},
	{"move", `{"call_id":"c","action":{"type":"move","x":7,"y":8}}`, Batch{{Kind: KindMove, At: &Point{7, 8}}}},
	{"scroll pixels", `{"call_id":"c","action":{"type":"scroll","x":640,"y":400,"scroll_x":0,"scroll_y":300}}`,
		Batch{{Kind: KindScroll, At: &Point{640, 400}, DY: 3}}},
	{"scroll small", `{"call_id":"c","action":{"type":"scroll","x":1,"y":1,"scroll_x":-40,"scroll_y":50}}`,
		Batch{{Kind: KindScroll, At: &Point{1, 1}, DX: -1, DY: 1}}},
	{"type", `{"call_id":"c","action":{"type":"type","text":"hello"}}`, Batch{{Kind: KindType, Text: "hello"}}},
	{"keypress", `{"call_id":"c","action":{"type":"keypress","keys":["CTRL","L"]}}`, Batch{{Kind: KindKey, Chord: "CTRL+L"}}},
	{"keypress plus", `{"call_id":"c","action":{"type":"keypress","keys":["CTRL","+"]}}`, Batch{{Kind: KindKey, Chord: "CTRL++"}}},
	{"keypress enter", `{"call_id":"c","action":{"type":"keypress","keys":["ENTER"]}}`, Batch{{Kind: KindKey, Chord: "ENTER"}}},
	{"wait", `{"call_id":"c","action":{"type":"wait"}}`, Batch{{Kind: KindWait, Duration: time.Second}}},
	{"screenshot", `{"call_id":"c","action":{"type":"screenshot"}}`, Batch{{Kind: KindScreenshot}}},
	{"GA batch", `{"type":"computer_call","id":"cu_2","call_id":"call_2","actions":[
		{"type":"click","button":"left","x":10,"y":20,"keys":["CTRL"]},
		{"type":"type","text":"warmdesk"},
		{"type":"keypress","keys":["ENTER"]},
		{"type":"wait"},
		{"type":"screenshot"}],"status":"completed"}`,
		Batch{
			{Kind: KindClick, At: &Point{10, 20}, Button: ButtonLeft, Count: 1, Modifiers: []string{"CTRL"}},
			{Kind: KindType, Text: "warmdesk"},
			{Kind: KindKey, Chord: "ENTER"},
			{Kind: KindWait, Duration: time.Second},
			{Kind: KindScreenshot},
		}},
}

func TestDecodeOpenAI(t *testing.T) {
	for _, c := range openAICases {
		call, err := DecodeOpenAI([]byte(c.body), OpenAIOptions{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(call.Batch, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, call.Batch, c.want)
		}
		if err := Validate(call.Batch, ValidateOptions{Space: native}); err != nil {
			t.Errorf("%s: translation does not validate: %v", c.name, err)
		}
	}
}

func TestOpenAIScrollPixelsBecomeNotches(t *testing.T) {
	for _, c := range []struct{ px, per, want int }{
		{0, 100, 0}, {1, 100, 1}, {49, 100, 1}, {100, 100, 1}, {149, 100, 1}, {150, 100, 2},
		{300, 100, 3}, {-300, 100, -3}, {-1, 100, -1}, {-150, 100, -2}, {120, 40, 3}, {1000, 100, 10},
	} {
		if got := pixelsToNotches(c.px, c.per); got != c.want {
			t.Errorf("pixelsToNotches(%d, %d) = %d, want %d", c.px, c.per, got, c.want)
		}
	}
	call, err := DecodeOpenAI([]byte(`{"call_id":"c","action":{"type":"scroll","x":1,"y":1,"scroll_x":0,"scroll_y":-120}}`), OpenAIOptions{PixelsPerNotch: 40})
	if err != nil || call.Batch[0].DY != -3 {
		t.Errorf("with 40 px a notch: %+v, %v", call.Batch, err)
	}
}

func TestDecodeOpenAIOptions(t *testing.T) {
	call, err := DecodeOpenAI([]byte(`{"call_id":"c","action":{"type":"wait"}}`), OpenAIOptions{WaitDuration: 3 * time.Second})
	if err != nil || call.Batch[0].Duration != 3*time.Second {
		t.Errorf("got %+v, %v", call.Batch, err)
	}
}

func TestDecodeOpenAIErrors(t *testing.T) {
	for _, c := range []struct{ body, field, contains string }{
		{`{"action":{"type":"screenshot"}}`, "call_id", "required"},
		{`{"type":"message","call_id":"c","action":{"type":"screenshot"}}`, "type", "computer_call"},
		{`{"call_id":"c"}`, "action", "required"},
		{`{"call_id":"c","action":{"type":"screenshot"},"actions":[]}`, "actions", "not both"},
		{`{"call_id":"c","actions":[]}`, "actions", "no actions"},
		{`{"call_id":"c","action":{"type":"jump"}}`, "action.type", `unknown action "jump"`},
		{`{"call_id":"c","action":{"x":1}}`, "action.type", "required"},
		{`{"call_id":"c","action":{"type":"click","button":"huge","x":1,"y":2}}`, "action.button", "left, right, wheel"},
		{`{"call_id":"c","action":{"type":"click","x":1}}`, "action.y", "required"},
		{`{"call_id":"c","action":{"type":"move"}}`, "action.x", "required"},
		{`{"call_id":"c","actions":[{"type":"screenshot"},{"type":"scroll","x":1,"y":1,"scroll_y":"300"}]}`, "actions[1].scroll_y", "integer"},
		{`{"call_id":"c","action":{"type":"keypress","keys":[]}}`, "action.keys", "at least one key"},
		{`{"call_id":"c","action":{"type":"keypress","keys":["CTRL",""]}}`, "action.keys[1]", "empty key"},
		{`{"call_id":"c","action":{"type":"keypress","keys":"CTRL"}}`, "action.keys", "array of strings"},
		{`{"call_id":"c","action":{"type":"drag","path":[]}}`, "action.path", "at least one point"},
		{`{"call_id":"c","action":{"type":"drag","path":[[1,2,3]]}}`, "action.path[0]", "2 integers"},
		{`{"call_id":"c","action":{"type":"type"}}`, "action.text", "required"},
		{`{"call_id":"c","action":{"type":"screenshot"},"pending_safety_checks":[{"code":"x"}]}`, "pending_safety_checks[0].id", "required"},
	} {
		_, err := DecodeOpenAI([]byte(c.body), OpenAIOptions{})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Reason, c.contains) {
			t.Errorf("DecodeOpenAI(%s) = %v, want field %q containing %q", c.body, err, c.field, c.contains)
		}
	}
}

func TestOpenAIPreviewOutput(t *testing.T) {
	call, err := DecodeOpenAI([]byte(`{"call_id":"call_1","action":{"type":"screenshot"},"pending_safety_checks":[{"id":"sc"}]}`), OpenAIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(NewOpenAIOutput(call, Image{MediaType: "image/jpeg", Data: []byte{0xff, 0xd8}}, nil, ""))
	const want = `{"type":"computer_call_output","call_id":"call_1","output":{"type":"computer_screenshot","image_url":"data:image/jpeg;base64,/9g="},"acknowledged_safety_checks":[]}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestOpenAIErrorText(t *testing.T) {
	ga := OpenAICall{Batched: true}
	preview := OpenAICall{}
	for _, c := range []struct {
		call OpenAICall
		err  error
		want string
	}{
		{ga, &ValidationError{Field: "actions[2].dy", Reason: "over"}, "actions[2].scroll_y: over"},
		{ga, &ValidationError{Field: "actions[0].dx", Reason: "over"}, "actions[0].scroll_x: over"},
		{ga, &ValidationError{Field: "actions[1].modifiers[0]", Reason: "unknown key"}, "actions[1].keys[0]: unknown key"},
		{preview, &ValidationError{Field: "actions[0].chord[1]", Reason: "unknown key"}, "action.keys[1]: unknown key"},
		{preview, &ValidationError{Field: "actions[0].path[1].x", Reason: "outside"}, "action.path[1].x: outside"},
		{preview, &ValidationError{Field: "actions", Reason: "too many"}, "actions: too many"},
		{preview, errors.New("boom"), "boom"},
	} {
		if got := OpenAIErrorText(c.call, c.err); got != c.want {
			t.Errorf("OpenAIErrorText(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// A call with pending safety checks may run only once every one is
// acknowledged, and is refused otherwise the way Gemini's unconfirmed
// calls are.
func TestOpenAIUnconfirmed(t *testing.T) {
	call, err := DecodeOpenAI([]byte(`{"call_id": "c", "action": {"type": "screenshot"},
	  "pending_safety_checks": [{"id": "cs_1", "code": "malicious_instructions", "message": "careful"}, {"id": "cs_2"}]}`), OpenAIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	only := func(ids ...string) func(OpenAISafetyCheck) bool {
		return func(c OpenAISafetyCheck) bool { return slices.Contains(ids, c.ID) }
	}
	for _, c := range []struct {
		ack   func(OpenAISafetyCheck) bool
		field string
	}{{nil, "pending_safety_checks[0]"}, {only("cs_2"), "pending_safety_checks[0]"}, {only("cs_1"), "pending_safety_checks[1]"}} {
		ack, field := c.ack, c.field
		err := call.Unconfirmed(ack)
		var ce *ConfirmationError
		if !errors.As(err, &ce) || ce.Field != field || !errors.Is(err, ErrUnconfirmed) || !strings.Contains(err.Error(), "acknowledge_safety_checks=") {
			t.Errorf("got %v, want a refusal on %s", err, field)
		}
	}
	if err := call.Unconfirmed(only("cs_1", "cs_2")); err != nil {
		t.Errorf("all acknowledged: %v", err)
	}
	if err := (OpenAICall{}).Unconfirmed(nil); err != nil {
		t.Errorf("no checks: %v", err)
	}
	// Gemini's refusal is the same error.
	g, err := DecodeGemini(json.RawMessage(`{"name": "click_at", "args": {"x": 1, "y": 1, "safety_decision": {"decision": "require_confirmation", "explanation": "a purchase"}}}`), geminiBrowser)
	if err != nil {
		t.Fatal(err)
	}
	var ce *ConfirmationError
	if err := g.unconfirmed(false); !errors.As(err, &ce) || ce.Field != "args.safety_decision" || !strings.Contains(ce.Flag, "a purchase") {
		t.Errorf("gemini: %v", err)
	}
}
