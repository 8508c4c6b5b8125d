package input

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// anthropicCases are computer tool inputs in the shapes of the tool's
// published schema for computer_20241022, computer_20250124 and
// computer_20251124, with their canonical translation. FuzzDecodeAnthropic
// is seeded from them.
var anthropicCases = []struct {
	version string
	body    string
	want    Batch
}{
	{"20241022", `{"action":"key","text":"Return"}`, Batch{{Kind: KindKey, Chord: "Return"}}},
	{"20241022", `{"action":"key","text":"ctrl+s"}`, Batch{{Kind: KindKey, Chord: "ctrl+s"}}},
	{"20241022", `{"action":"type","text":"Hello, world!\n"}`, Batch{{Kind: KindType, Text: "Hello, world!\n"}}},
	{"20241022", `{"action":"mouse_move","coordinate":[100,200]}`, Batch{{Kind: KindMove, At: &Point{100, 200}}}},
	{"20241022", `{"action":"left_click"}`, Batch{{Kind: KindClick, Button: ButtonLeft, Count: 1}}},
	{"20241022", `{"action":"left_click_drag","coordinate":[300,400]}`,
		Batch{{Kind: KindDrag, Button: ButtonLeft, Path: []Point{{300, 400}}}}},
	{"20241022", `{"action":"right_click"}`, Batch{{Kind: KindClick, Button: ButtonRight, Count: 1}}},
	{"20241022", `{"action":"middle_click"}`, Batch{{Kind: KindClick, Button: ButtonMiddle, Count: 1}}},
	{"20241022", `{"action":"double_click"}`, Batch{{Kind: KindClick, Button: ButtonLeft, Count: 2}}},
	{"20241022", `{"action":"screenshot"}`, Batch{{Kind: KindScreenshot}}},
	{"20241022", `{"action":"cursor_position"}`, Batch{{Kind: KindCursorPosition}}},
	{"20250124", `{"action":"left_click","coordinate":[500,300],"text":"shift"}`,
		Batch{{Kind: KindClick, At: &Point{500, 300}, Button: ButtonLeft, Count: 1, Modifiers: []string{"shift"}}}},
	{"20250124", `{"action":"left_click","coordinate":[500,300],"text":"ctrl+shift"}`,
		Batch{{Kind: KindClick, At: &Point{500, 300}, Button: ButtonLeft, Count: 1, Modifiers: []string{"ctrl", "shift"}}}},
	{"20250124 demo", `{"action":"left_click","coordinate":[500,300],"key":"ctrl"}`,
		Batch{{Kind: KindClick, At: &Point{500, 300}, Button: ButtonLeft, Count: 1, Modifiers: []string{"ctrl"}}}},
	{"20250124", `{"action":"triple_click","coordinate":[10,10]}`,
		Batch{{Kind: KindClick, At: &Point{10, 10}, Button: ButtonLeft, Count: 3}}},
	{"20250124", `{"action":"left_click_drag","start_coordinate":[10,20],"coordinate":[30,40]}`,
		Batch{{Kind: KindDrag, Button: ButtonLeft, Path: []Point{{10, 20}, {30, 40}}}}},
	{"20250124", `{"action":"left_mouse_down"}`, Batch{{Kind: KindMouseDown, Button: ButtonLeft}}},
	{"20250124", `{"action":"left_mouse_up","coordinate":[5,5]}`, Batch{{Kind: KindMouseUp, Button: ButtonLeft, At: &Point{5, 5}}}},
	{"20250124", `{"action":"scroll","coordinate":[640,400],"scroll_direction":"down","scroll_amount":3}`,
		Batch{{Kind: KindScroll, At: &Point{640, 400}, DY: 3}}},
	{"20250124", `{"action":"scroll","coordinate":[640,400],"scroll_direction":"up","scroll_amount":5}`,
		Batch{{Kind: KindScroll, At: &Point{640, 400}, DY: -5}}},
	{"20250124", `{"action":"scroll","scroll_direction":"left","scroll_amount":2,"text":"shift"}`,
		Batch{{Kind: KindScroll, DX: -2, Modifiers: []string{"shift"}}}},
	{"20250124", `{"action":"scroll","coordinate":[1,1],"scroll_direction":"right","scroll_amount":1}`,
		Batch{{Kind: KindScroll, At: &Point{1, 1}, DX: 1}}},
	{"20250124", `{"action":"hold_key","text":"shift","duration":1}`,
		Batch{{Kind: KindHoldKey, Keys: []string{"shift"}, Duration: time.Second}}},
	{"20250124", `{"action":"hold_key","text":"ctrl+alt","duration":0.25}`,
		Batch{{Kind: KindHoldKey, Keys: []string{"ctrl", "alt"}, Duration: 250 * time.Millisecond}}},
	{"20250124", `{"action":"wait","duration":2}`, Batch{{Kind: KindWait, Duration: 2 * time.Second}}},
	{"20250124 xdotool", `{"action":"key","text":"ctrl+a Delete"}`,
		Batch{{Kind: KindKey, Chord: "ctrl+a"}, {Kind: KindKey, Chord: "Delete"}}},
	{"20251124", `{"action":"zoom","region":[0,0,640,400]}`, Batch{{Kind: KindZoom, Region: &Rect{0, 0, 640, 400}}}},
	{"20251124", `{"action":"left_click","coordinate":[12.0,34],"future_field":true}`,
		Batch{{Kind: KindClick, At: &Point{12, 34}, Button: ButtonLeft, Count: 1}}},
	{"toolset 20260801", `{"action":"key","text":"Down","repeat":4}`, Batch{{Kind: KindKey, Chord: "Down", Repeat: 4}}},
}

func TestDecodeAnthropic(t *testing.T) {
	for _, c := range anthropicCases {
		call, err := DecodeAnthropic([]byte(c.body))
		if err != nil {
			t.Errorf("%s %s: %v", c.version, c.body, err)
			continue
		}
		if !reflect.DeepEqual(call.Batch, c.want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.version, c.body, call.Batch, c.want)
		}
		// Every translation must be a valid canonical batch.
		if err := Validate(call.Batch, ValidateOptions{Space: native}); err != nil {
			t.Errorf("%s %s: translation does not validate: %v", c.version, c.body, err)
		}
	}
}

func TestDecodeAnthropicMember(t *testing.T) {
	call, err := DecodeAnthropicMember("left_click", []byte(`{"coordinate":[3,4],"text":"ctrl"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Batch{{Kind: KindClick, At: &Point{3, 4}, Button: ButtonLeft, Count: 1, Modifiers: []string{"ctrl"}}}
	if call.Action != "left_click" || !reflect.DeepEqual(call.Batch, want) {
		t.Errorf("got %+v", call)
	}
	if _, err := DecodeAnthropicMember("left_click", []byte(`{"action":"right_click"}`)); err == nil {
		t.Error("a mismatched action was accepted")
	}
}

func TestDecodeAnthropicErrors(t *testing.T) {
	for _, c := range []struct{ body, field, contains string }{
		{`{"action":"teleport"}`, "action", `unknown action "teleport"`},
		{`{"coordinate":[1,2]}`, "action", "required"},
		{`{"action":"mouse_move"}`, "coordinate", "required"},
		{`{"action":"mouse_move","coordinate":[1]}`, "coordinate", "2 integers"},
		{`{"action":"mouse_move","coordinate":[1,"2"]}`, "coordinate[1]", "integer"},
		{`{"action":"left_click","coordinate":{"x":1,"y":2}}`, "coordinate", "must be an array"},
		{`{"action":"left_click_drag","start_coordinate":[1,2]}`, "coordinate", "required"},
		{`{"action":"type"}`, "text", "required"},
		{`{"action":"type","text":5}`, "text", "must be a string"},
		{`{"action":"key","text":"  "}`, "text", "no key"},
		{`{"action":"scroll","coordinate":[1,2],"scroll_amount":3}`, "scroll_direction", "required"},
		{`{"action":"scroll","scroll_direction":"sideways","scroll_amount":3}`, "scroll_direction", "up, down, left or right"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":-1}`, "scroll_amount", "negative"},
		{`{"action":"scroll","scroll_direction":"up"}`, "scroll_amount", "required"},
		{`{"action":"hold_key","text":"shift"}`, "duration", "required"},
		{`{"action":"wait","duration":"1"}`, "duration", "number of seconds"},
		{`{"action":"zoom"}`, "region", "required"},
		{`{"action":"zoom","region":[1,2,3]}`, "region", "4 integers"},
		{`{"action":"left_click","text":"ctrl+"}`, "text", "ends with"},
	} {
		_, err := DecodeAnthropic([]byte(c.body))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Reason, c.contains) {
			t.Errorf("DecodeAnthropic(%s) = %v, want field %q containing %q", c.body, err, c.field, c.contains)
		}
	}
}

func TestAnthropicErrorTextUsesToolFields(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&ValidationError{Field: "actions[0].chord[1]", Reason: "unknown key"}, "text: unknown key"},
		{&ValidationError{Field: "actions[0].modifiers[0]", Reason: "unknown key"}, "text: unknown key"},
		{&ValidationError{Field: "actions[0].dy", Reason: "over"}, "scroll_amount: over"},
		{&ValidationError{Field: "actions[0].path[1].x", Reason: "outside"}, "start_coordinate or coordinate: outside"},
		{&ValidationError{Field: "actions[0].duration", Reason: "over"}, "duration: over"},
		{&ValidationError{Field: "coordinate", Reason: "required"}, "coordinate: required"},
		{errors.New("send input: boom"), "send input: boom"},
	} {
		if got := anthropicErrorText(c.err); got != c.want {
			t.Errorf("anthropicErrorText(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// Warnings follow the screenshot as text blocks; none add nothing.
func TestAnthropicToolResultNotes(t *testing.T) {
	img := &Image{MediaType: "image/png", Data: []byte{1}}
	res := NewAnthropicToolResult("tu_1", AnthropicCall{Action: "type"}, BatchResult{}, nil, img)
	res.Note(nil)
	if len(res.Content) != 1 {
		t.Fatalf("no warnings changed the content: %+v", res.Content)
	}
	res.Note([]string{"keys followed a click"})
	if len(res.Content) != 2 || res.Content[0].Type != "image" || res.Content[1].Type != "text" || res.Content[1].Text != "Note: keys followed a click" {
		t.Fatalf("content with a warning: %+v", res.Content)
	}
}
