package input

import (
	"encoding/json"
	"errors"
	"image"
	"strings"
	"testing"
	"time"
)

var geminiScreen = image.Point{X: 1280, Y: 800}

func geminiBatch(t *testing.T, call string) Batch {
	t.Helper()
	c, err := DecodeGemini(json.RawMessage(call), geminiScreen, "")
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	if err := Validate(c.Batch, ValidateOptions{Space: NativeSpace{Width: geminiScreen.X, Height: geminiScreen.Y}, HasGuest: true}); err != nil {
		t.Fatalf("%s: the batch does not validate: %v", call, err)
	}
	return c.Batch
}

// Every function of both environments translates; the grid maps onto the
// screen as int(v/1000*W).
func TestGeminiFunctions(t *testing.T) {
	p := func(x, y int) *Point { return &Point{X: x, Y: y} }
	for call, want := range map[string]Batch{
		`{"name": "click_at", "args": {"y": 500, "x": 250, "intent": "open the menu"}}`: {{Kind: KindClick, At: p(320, 400), Button: ButtonLeft, Count: 1}},
		`{"name": "click", "args": {"x": 999, "y": 0}}`:                                 {{Kind: KindClick, At: p(1278, 0), Button: ButtonLeft, Count: 1}},
		`{"name": "double_click", "args": {"x": 500, "y": 500}}`:                        {{Kind: KindClick, At: p(640, 400), Button: ButtonLeft, Count: 2}},
		`{"name": "triple_click", "args": {"x": 500, "y": 500}}`:                        {{Kind: KindClick, At: p(640, 400), Button: ButtonLeft, Count: 3}},
		`{"name": "middle_click", "args": {"x": 500, "y": 500}}`:                        {{Kind: KindClick, At: p(640, 400), Button: ButtonMiddle, Count: 1}},
		`{"name": "right_click", "args": {"x": 500, "y": 500}}`:                         {{Kind: KindClick, At: p(640, 400), Button: ButtonRight, Count: 1}},
		`{"name": "mouse_down", "args": {"x": 100, "y": 100}}`:                          {{Kind: KindMouseDown, At: p(128, 80)}},
		`{"name": "mouse_up", "args": {"x": 100, "y": 100}}`:                            {{Kind: KindMouseUp, At: p(128, 80)}},
		`{"name": "move", "args": {"x": 100, "y": 100}}`:                                {{Kind: KindMove, At: p(128, 80)}},
		`{"name": "hover_at", "args": {"x": 100, "y": 100}}`:                            {{Kind: KindMove, At: p(128, 80)}},
		`{"name": "type", "args": {"text": "hi"}}`:                                      {{Kind: KindType, Text: "hi"}},
		`{"name": "type", "args": {"text": "hi", "press_enter": true}}`:                 {{Kind: KindType, Text: "hi"}, {Kind: KindKey, Chord: "Return"}},
		`{"name": "type_text_at", "args": {"x": 500, "y": 100, "text": "cats"}}`: {
			{Kind: KindClick, At: p(640, 80)}, {Kind: KindKey, Chord: "ctrl+a"}, {Kind: KindKey, Chord: "Delete"},
			{Kind: KindType, Text: "cats"}, {Kind: KindKey, Chord: "Return"}},
		`{"name": "type_text_at", "args": {"x": 500, "y": 100, "text": "cats", "press_enter": false, "clear_before_typing": false}}`: {
			{Kind: KindClick, At: p(640, 80)}, {Kind: KindType, Text: "cats"}},
		`{"name": "drag_and_drop", "args": {"x": 100, "y": 100, "destination_x": 500, "destination_y": 500}}`: {{Kind: KindDrag, Path: []Point{{128, 80}, {640, 400}}, Button: ButtonLeft}},
		`{"name": "drag_and_drop", "args": {"start_x": 100, "start_y": 100, "end_x": 500, "end_y": 500}}`:     {{Kind: KindDrag, Path: []Point{{128, 80}, {640, 400}}, Button: ButtonLeft}},
		`{"name": "wait", "args": {"seconds": 3}}`:                                                            {{Kind: KindWait, Duration: 3 * time.Second}},
		`{"name": "wait"}`:                                             {{Kind: KindWait, Duration: time.Second}},
		`{"name": "wait_5_seconds", "args": {}}`:                       {{Kind: KindWait, Duration: 5 * time.Second}},
		`{"name": "press_key", "args": {"key": "Enter"}}`:              {{Kind: KindKey, Chord: "Enter"}},
		`{"name": "key_combination", "args": {"keys": "Control+A"}}`:   {{Kind: KindKey, Chord: "Control+A"}},
		`{"name": "hotkey", "args": {"keys": ["ctrl", "shift", "t"]}}`: {{Kind: KindKey, Chord: "ctrl+shift+t"}},
		`{"name": "take_screenshot"}`:                                  {{Kind: KindScreenshot}},
		`{"name": "open_web_browser"}`:                                 {{Kind: KindScreenshot}},
		`{"name": "go_back"}`:                                          {{Kind: KindKey, Chord: "alt+Left"}},
		`{"name": "go_forward"}`:                                       {{Kind: KindKey, Chord: "alt+Right"}},
		`{"name": "navigate", "args": {"url": "http://127.0.0.1:8000/"}}`: {
			{Kind: KindKey, Chord: "ctrl+l"}, {Kind: KindType, Text: "http://127.0.0.1:8000/"}, {Kind: KindKey, Chord: "Return"}},
		`{"name": "search"}`: {{Kind: KindKey, Chord: "ctrl+l"}, {Kind: KindType, Text: DefaultGeminiSearchURL}, {Kind: KindKey, Chord: "Return"}},
		// 800 of 1000 of an 800-pixel axis is 640 pixels: 6 notches.
		`{"name": "scroll_at", "args": {"x": 500, "y": 500, "direction": "down"}}`:                               {{Kind: KindScroll, At: p(640, 400), DY: 6}},
		`{"name": "scroll_at", "args": {"x": 500, "y": 500, "direction": "left", "magnitude": 100}}`:             {{Kind: KindScroll, At: p(640, 400), DX: -1}},
		`{"name": "scroll", "args": {"x": 500, "y": 500, "direction": "up"}}`:                                    {{Kind: KindScroll, At: p(640, 400), DY: -2}},
		`{"name": "scroll", "args": {"x": 500, "y": 500, "direction": "right", "magnitude_in_wheel_clicks": 4}}`: {{Kind: KindScroll, At: p(640, 400), DX: 4}},
		`{"name": "scroll_document", "args": {"direction": "down"}}`:                                             {{Kind: KindKey, Chord: "Page_Down"}},
		`{"name": "scroll_document", "args": {"direction": "right"}}`:                                            {{Kind: KindScroll, At: p(640, 400), DX: 10}},
	} {
		got := geminiBatch(t, call)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s:\n got %s\nwant %s", call, gb, wb)
		}
	}
	// Every listed function has a case above.
	for _, name := range geminiFunctions() {
		if _, err := DecodeGemini(json.RawMessage(`{"name": "`+name+`"}`), geminiScreen, ""); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) && ve.Field == "name" {
				t.Errorf("%s is listed but not translated: %v", name, err)
			}
		}
	}
}

func TestGeminiErrors(t *testing.T) {
	for call, field := range map[string]string{
		`{"name": "click_at", "args": {"x": 1000, "y": 5}}`:   "args.x",
		`{"name": "click_at", "args": {"x": -1, "y": 5}}`:     "args.x",
		`{"name": "click_at", "args": {"x": 5}}`:              "args.y",
		`{"name": "click_at", "args": {"x": "left", "y": 5}}`: "args.x",
		`{"name": "fly"}`: "name",
		`{"name": "key_down", "args": {"key": "shift"}}`: "name",
		`{"args": {}}`:                     "name",
		`{"name": "navigate", "args": {}}`: "args.url",
		`{"name": "scroll_at", "args": {"x": 1, "y": 1, "direction": "sideways"}}`: "args.direction",
		`{"name": "hotkey", "args": {"keys": []}}`:                                 "args.keys",
		`{"name": "wait", "args": {"seconds": 600}}`:                               "args.seconds",
	} {
		_, err := DecodeGemini(json.RawMessage(call), geminiScreen, "")
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: got %v, want an error on %s", call, err, field)
		}
	}
}

func TestDecodeGeminiCalls(t *testing.T) {
	for body, n := range map[string]int{
		`{"name": "click_at", "args": {"x": 1, "y": 1}}`:                                                                  1,
		`{"functionCall": {"name": "click_at", "args": {"x": 1, "y": 1}}}`:                                                1,
		`[{"function_call": {"name": "go_back"}}, {"name": "go_forward"}]`:                                                2,
		`{"role": "model", "parts": [{"text": "Going back."}, {"functionCall": {"name": "go_back"}}, {"thought": true}]}`: 1,
	} {
		calls, err := DecodeGeminiCalls([]byte(body))
		if err != nil || len(calls) != n {
			t.Errorf("%s: %d calls, %v", body, len(calls), err)
		}
	}
	if _, err := DecodeGeminiCalls([]byte(`{"role": "model", "parts": [{"text": "done"}]}`)); err == nil {
		t.Error("a turn without a function call was accepted")
	}
}

// A turn stops at its first failure; a require_confirmation call runs only
// acknowledged, and then says so in its response.
func TestRunGeminiTurn(t *testing.T) {
	calls, err := DecodeGeminiCalls([]byte(`[
	  {"name": "click_at", "args": {"x": 10, "y": 10}},
	  {"name": "type_text_at", "args": {"x": 10, "y": 10, "text": "buy", "safety_decision": {"decision": "require_confirmation", "explanation": "a purchase"}}},
	  {"name": "go_back"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	run := func(c GeminiCall) (*Image, error) {
		ran = append(ran, c.Name)
		return &Image{MediaType: "image/png", Data: []byte("png")}, nil
	}
	// Unconfirmed, nothing of the turn runs, so that posting it again
	// confirmed runs no call twice.
	parts, failed := RunGeminiTurn(calls, geminiScreen, "", false, run)
	if failed != 1 || len(ran) != 0 || len(parts) != 3 {
		t.Fatalf("failed %d, ran %v, %d parts", failed, ran, len(parts))
	}
	if r := parts[1].FunctionResponse; !strings.Contains(r.Response["error"].(string), "a person must confirm") {
		t.Errorf("second %+v", r)
	}
	for _, i := range []int{0, 2} {
		if e, _ := parts[i].FunctionResponse.Response["error"].(string); !strings.Contains(e, "not executed") {
			t.Errorf("call %d: %+v", i, parts[i].FunctionResponse)
		}
	}
	// A failure while running stops the rest.
	stop, _ := DecodeGeminiCalls([]byte(`[{"name": "click_at", "args": {"x": 10, "y": 10}}, {"name": "key_up", "args": {"key": "a"}}, {"name": "go_back"}]`))
	parts, failed = RunGeminiTurn(stop, geminiScreen, "", false, run)
	if failed != 1 || strings.Join(ran, ",") != "click_at" || parts[2].FunctionResponse.Response["error"] != GeminiNotExecuted {
		t.Errorf("failed %d, ran %v, %+v", failed, ran, parts)
	}
	if r := parts[0].FunctionResponse; r.Name != "click_at" || len(r.Parts) != 1 || r.Parts[0].InlineData.MimeType != "image/png" || r.Response["error"] != nil {
		t.Errorf("first %+v", r)
	}
	ran = nil
	parts, failed = RunGeminiTurn(calls, geminiScreen, "", true, run)
	if failed != -1 || len(ran) != 3 || parts[1].FunctionResponse.Response["safety_acknowledgement"] != "true" {
		t.Errorf("acknowledged: failed %d, ran %v, %+v", failed, ran, parts[1])
	}
}

func FuzzDecodeGemini(f *testing.F) {
	f.Add([]byte(`{"role": "model", "parts": [{"functionCall": {"name": "click_at", "args": {"x": 500, "y": 500}}}]}`))
	f.Add([]byte(`[{"name": "scroll", "args": {"x": 1, "y": 2, "direction": "up", "magnitude_in_pixels": 998}}]`))
	f.Add([]byte(`{"name": "type_text_at", "args": {"x": 0, "y": 999, "text": "é", "safety_decision": {"decision": "require_confirmation"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		calls, err := DecodeGeminiCalls(body)
		if err != nil {
			return
		}
		for _, raw := range calls {
			c, err := DecodeGemini(raw, geminiScreen, "")
			var ve *ValidationError
			if err != nil && !errors.As(err, &ve) {
				t.Fatalf("error %v is not a ValidationError", err)
			}
			if err != nil {
				continue
			}
			// Every point it makes is on the screen.
			for _, a := range c.Batch {
				pts := a.Path
				if a.At != nil {
					pts = append(pts, *a.At)
				}
				for _, p := range pts {
					if p.X < 0 || p.Y < 0 || p.X >= geminiScreen.X || p.Y >= geminiScreen.Y {
						t.Fatalf("%s made %v, off the screen", raw, p)
					}
				}
			}
		}
	})
}
