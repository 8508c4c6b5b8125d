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

// geminiBrowser is a desktop with a browser, which takes every function.
var geminiBrowser = GeminiEnv{Space: geminiScreen, Browser: true}

func geminiBatch(t *testing.T, call string) Batch {
	t.Helper()
	c, err := DecodeGemini(json.RawMessage(call), geminiBrowser)
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
		// The page opens through DevTools first (Navigate): the batch
		// pictures it.
		`{"name": "navigate", "args": {"url": "http://127.0.0.1:8000/"}}`: {{Kind: KindScreenshot}},
		`{"name": "search"}`: {{Kind: KindScreenshot}},
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
		if _, err := DecodeGemini(json.RawMessage(`{"name": "`+name+`"}`), geminiBrowser); err != nil {
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
		_, err := DecodeGemini(json.RawMessage(call), geminiBrowser)
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
	run := func(c GeminiCall) (GeminiState, error) {
		ran = append(ran, c.Name)
		return GeminiState{Screenshot: &Image{MediaType: "image/png", Data: []byte("png")}}, nil
	}
	// Unconfirmed, nothing of the turn runs, so that posting it again
	// confirmed runs no call twice.
	parts, failed := RunGeminiTurn(calls, geminiBrowser, false, run)
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
	parts, failed = RunGeminiTurn(stop, geminiBrowser, false, run)
	if failed != 1 || strings.Join(ran, ",") != "click_at" || parts[2].FunctionResponse.Response["error"] != GeminiNotExecuted {
		t.Errorf("failed %d, ran %v, %+v", failed, ran, parts)
	}
	if r := parts[0].FunctionResponse; r.Name != "click_at" || len(r.Parts) != 1 || r.Parts[0].InlineData.MimeType != "image/png" || r.Response["error"] != nil {
		t.Errorf("first %+v", r)
	}
	ran = nil
	parts, failed = RunGeminiTurn(calls, geminiBrowser, true, run)
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
			c, err := DecodeGemini(raw, geminiBrowser)
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

// A call's id comes back in its functionResponse, whatever became of the
// call; a part whose functionCall is null (an SDK's model_dump()) is no
// call, in either spelling, so one call gets one response.
func TestGeminiTurnIDsAndNullParts(t *testing.T) {
	for _, body := range []string{
		`{"role": "model", "parts": [
		  {"text": "Clicking.", "functionCall": null, "thought": null, "inlineData": null},
		  {"text": null, "functionCall": {"id": "fc_1", "name": "click_at", "args": {"x": 10, "y": 10}, "partialArgs": null}},
		  {"functionCall": {"id": "fc_2", "name": "key_up", "args": {"key": "a"}}},
		  {"functionCall": {"id": "fc_3", "name": "go_back"}, "function_call": null}]}`,
		`{"role": "model", "parts": [
		  {"text": "Clicking.", "function_call": null, "thought_signature": null},
		  {"text": null, "function_call": {"id": "fc_1", "name": "click_at", "args": {"x": 10, "y": 10}, "will_continue": null}},
		  {"function_call": {"id": "fc_2", "name": "key_up", "args": {"key": "a"}}},
		  {"function_call": {"id": "fc_3", "name": "go_back", "args": null}}]}`,
	} {
		calls, err := DecodeGeminiCalls([]byte(body))
		if err != nil || len(calls) != 3 {
			t.Fatalf("%d calls, %v", len(calls), err)
		}
		var ran []string
		parts, failed := RunGeminiTurn(calls, geminiBrowser, false, func(c GeminiCall) (GeminiState, error) {
			ran = append(ran, c.ID)
			return GeminiState{}, nil
		})
		if failed != 1 || strings.Join(ran, ",") != "fc_1" || len(parts) != 3 {
			t.Fatalf("failed %d, ran %v, %d parts", failed, ran, len(parts))
		}
		for i, want := range []string{"fc_1", "fc_2", "fc_3"} {
			if got := parts[i].FunctionResponse.ID; got != want {
				t.Errorf("response %d has id %q, want %q", i, got, want)
			}
		}
		out, _ := json.Marshal(parts[0])
		if !strings.Contains(string(out), `"functionResponse":{"id":"fc_1","name":"click_at"`) {
			t.Errorf("answer %s", out)
		}
	}
	// Refused unconfirmed, each response still names its call.
	calls, _ := DecodeGeminiCalls([]byte(`[{"id": "a", "name": "wait_5_seconds"},
	  {"id": "b", "name": "click_at", "args": {"x": 1, "y": 1, "safety_decision": {"decision": "require_confirmation"}}}]`))
	parts, _ := RunGeminiTurn(calls, geminiBrowser, false, nil)
	if parts[0].FunctionResponse.ID != "a" || parts[1].FunctionResponse.ID != "b" {
		t.Errorf("refused turn: %+v", parts)
	}
	// A call without an id answers without one.
	out, _ := json.Marshal(GeminiPart{GeminiFunctionResponse{Name: "wait", Response: map[string]any{}}})
	if strings.Contains(string(out), `"id"`) {
		t.Errorf("no id given, answered %s", out)
	}
	if _, err := DecodeGeminiCalls([]byte(`{"parts": [{"functionCall": {"name": "go_back"}, "function_call": {"name": "go_back"}}]}`)); err == nil {
		t.Error("a part with both spellings was taken")
	}
	if _, err := DecodeGeminiCalls([]byte(`{"parts": [{"functionCall": null}]}`)); err == nil {
		t.Error("a turn whose only call is null was taken")
	}
}

// The browser's own functions are refused on a desktop without a browser,
// so nothing is typed into whatever has focus; on one with a browser the
// page's URL comes back in each response.
func TestGeminiBrowserFunctions(t *testing.T) {
	desktop := GeminiEnv{Space: geminiScreen}
	for _, call := range []string{
		`{"name": "navigate", "args": {"url": "http://127.0.0.1:8000/holdout-nav"}}`,
		`{"name": "search"}`, `{"name": "go_back"}`, `{"name": "go_forward"}`, `{"name": "open_web_browser"}`,
	} {
		_, err := DecodeGemini(json.RawMessage(call), desktop)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "name" || !strings.Contains(ve.Reason, "no browser") {
			t.Errorf("%s on a desktop without a browser: %v", call, err)
		}
		if _, err := DecodeGemini(json.RawMessage(call), geminiBrowser); err != nil {
			t.Errorf("%s with a browser: %v", call, err)
		}
	}
	// The desktop environment's functions all work without one.
	for _, call := range []string{`{"name": "type", "args": {"text": "ls"}}`, `{"name": "key_combination", "args": {"keys": "Control+L"}}`, `{"name": "scroll_document", "args": {"direction": "up"}}`} {
		if _, err := DecodeGemini(json.RawMessage(call), desktop); err != nil {
			t.Errorf("%s without a browser: %v", call, err)
		}
	}
	calls, _ := DecodeGeminiCalls([]byte(`[{"name": "navigate", "args": {"url": "http://127.0.0.1:8000/"}}]`))
	ran := 0
	parts, failed := RunGeminiTurn(calls, desktop, false, func(GeminiCall) (GeminiState, error) { ran++; return GeminiState{}, nil })
	if failed != 0 || ran != 0 || !strings.Contains(parts[0].FunctionResponse.Response["error"].(string), "no browser") {
		t.Errorf("failed %d, ran %d, %+v", failed, ran, parts)
	}
	parts, _ = RunGeminiTurn(calls, geminiBrowser, false, func(GeminiCall) (GeminiState, error) {
		return GeminiState{URL: "http://127.0.0.1:8000/"}, nil
	})
	if got := parts[0].FunctionResponse.Response["url"]; got != "http://127.0.0.1:8000/" {
		t.Errorf("url %v", got)
	}
}

// navigate and search name the page to open; an address without a scheme
// gets https://, as Google's reference client gives it.
func TestGeminiNavigate(t *testing.T) {
	for call, want := range map[string]string{
		`{"name": "navigate", "args": {"url": "http://127.0.0.1:8000/x"}}`: "http://127.0.0.1:8000/x",
		`{"name": "navigate", "args": {"url": "example.com/a?b=c"}}`:       "https://example.com/a?b=c",
		`{"name": "navigate", "args": {"url": "localhost:8000/x"}}`:        "https://localhost:8000/x",
		`{"name": "navigate", "args": {"url": "chrome://version"}}`:        "chrome://version",
		`{"name": "navigate", "args": {"url": "about:blank"}}`:             "about:blank",
		`{"name": "search"}`:                             DefaultGeminiSearchURL,
		`{"name": "go_back"}`:                            "",
		`{"name": "click_at", "args": {"x": 1, "y": 1}}`: "",
	} {
		c, err := DecodeGemini(json.RawMessage(call), geminiBrowser)
		if err != nil || c.Navigate != want {
			t.Errorf("%s: navigate %q, %v; want %q", call, c.Navigate, err, want)
		}
	}
	c, _ := DecodeGemini(json.RawMessage(`{"name": "search"}`), GeminiEnv{Space: geminiScreen, SearchURL: "http://127.0.0.1:9/", Browser: true})
	if c.Navigate != "http://127.0.0.1:9/" {
		t.Errorf("search_url: %q", c.Navigate)
	}
	_, err := DecodeGemini(json.RawMessage(`{"name": "navigate", "args": {"url": " "}}`), geminiBrowser)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "args.url" {
		t.Errorf("an empty url: %v", err)
	}
}
