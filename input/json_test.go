package input

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// actionCases are canonical JSON actions and what they decode to. The fuzz
// target FuzzDecodeBatch is seeded from them.
var actionCases = []struct {
	body string
	want Action
}{
	{`{"action":"screenshot"}`, Action{Kind: KindScreenshot}},
	{`{"action":"cursor_position"}`, Action{Kind: KindCursorPosition}},
	{`{"action":"click","x":0,"y":0}`, Action{Kind: KindClick, At: &Point{0, 0}}},
	{`{"action":"click","x":10,"y":20,"button":"right","count":2,"modifiers":["ctrl","shift"]}`,
		Action{Kind: KindClick, At: &Point{10, 20}, Button: ButtonRight, Count: 2, Modifiers: []string{"ctrl", "shift"}}},
	{`{"action":"click","button":"forward"}`, Action{Kind: KindClick, Button: ButtonForward}},
	{`{"action":"move","x":5.0,"y":6}`, Action{Kind: KindMove, At: &Point{5, 6}}},
	{`{"action":"move","x":5,"y":6,"modifiers":["alt"]}`, Action{Kind: KindMove, At: &Point{5, 6}, Modifiers: []string{"alt"}}},
	{`{"action":"drag","path":[{"x":1,"y":2},{"x":3,"y":4}],"button":"middle","modifiers":["shift"]}`,
		Action{Kind: KindDrag, Path: []Point{{1, 2}, {3, 4}}, Button: ButtonMiddle, Modifiers: []string{"shift"}}},
	{`{"action":"mouse_down","button":"left","x":7,"y":8}`, Action{Kind: KindMouseDown, Button: ButtonLeft, At: &Point{7, 8}}},
	{`{"action":"mouse_up","button":"back"}`, Action{Kind: KindMouseUp, Button: ButtonBack}},
	{`{"action":"scroll","x":100,"y":200,"dx":-1,"dy":3,"modifiers":["ctrl"]}`,
		Action{Kind: KindScroll, At: &Point{100, 200}, DX: -1, DY: 3, Modifiers: []string{"ctrl"}}},
	{`{"action":"type","text":"naïve café\n"}`, Action{Kind: KindType, Text: "naïve café\n"}},
	{`{"action":"key","chord":"ctrl+shift+t"}`, Action{Kind: KindKey, Chord: "ctrl+shift+t"}},
	{`{"action":"key","chord":"Return","repeat":3}`, Action{Kind: KindKey, Chord: "Return", Repeat: 3}},
	{`{"action":"hold_key","keys":["shift"],"duration":1.5}`, Action{Kind: KindHoldKey, Keys: []string{"shift"}, Duration: 1500 * time.Millisecond}},
	{`{"action":"wait","duration":2}`, Action{Kind: KindWait, Duration: 2 * time.Second}},
	{`{"action":"zoom","region":[0,0,640,400]}`, Action{Kind: KindZoom, Region: &Rect{0, 0, 640, 400}}},
	{`{"action":"click","x":1,"y":2,"modifiers":null}`, Action{Kind: KindClick, At: &Point{1, 2}}},
}

func TestDecodeAction(t *testing.T) {
	for _, c := range actionCases {
		got, err := DecodeAction([]byte(c.body))
		if err != nil {
			t.Errorf("DecodeAction(%s): %v", c.body, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeAction(%s)\n got %+v\nwant %+v", c.body, got, c.want)
		}
	}
}

func TestActionJSONRoundTrip(t *testing.T) {
	for _, c := range actionCases {
		b, err := json.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		var back Action
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("re-decoding %s: %v", b, err)
			continue
		}
		if !reflect.DeepEqual(back, c.want) {
			t.Errorf("round trip of %s: got %+v want %+v", c.body, back, c.want)
		}
	}
}

func TestDecodeActionErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ body, field, contains string }{
		{`{"action":"fly"}`, "action", `unknown action "fly"`},
		{`{}`, "action", "required"},
		{`{"action":3}`, "action", "must be a string"},
		{`{"action":"click","x":"10","y":2}`, "x", "must be an integer, got a string"},
		{`{"action":"click","x":1.5,"y":2}`, "x", "must be an integer"},
		{`{"action":"click","x":1}`, "y", "required when x is given"},
		{`{"action":"click","y":1}`, "x", "required when y is given"},
		{`{"action":"click","x":1,"y":2,"text":"hi"}`, "text", "unknown field for click"},
		{`{"action":"screenshot","x":1,"y":2}`, "x", "unknown field for screenshot"},
		{`{"action":"click","x":1,"x":2,"y":2}`, "x", "more than once"},
		{`{"action":"wait","duration":"1s"}`, "duration", "number of seconds"},
		{`{"action":"drag","path":[{"x":1}]}`, "path[0].y", "required when x is given"},
		{`{"action":"drag","path":[{"x":1,"y":2,"z":3}]}`, "path[0].z", "unknown field"},
		{`{"action":"drag","path":{"x":1,"y":2}}`, "path", "must be an array"},
		{`{"action":"zoom","region":[1,2,3]}`, "region", "4 integers"},
		{`{"action":"zoom","region":[1,2,3,"4"]}`, "region[3]", "must be an integer"},
		{`{"action":"hold_key","keys":"shift","duration":1}`, "keys", "array of strings"},
		{`{"action":"click","x":1e20,"y":2}`, "x", "out of range"},
		{`[]`, "", "must be a JSON object"},
		{`{"action":"screenshot"} {}`, "", "unexpected data"},
		{`{"action":"screenshot"`, "", "not valid JSON"},
	} {
		_, err := DecodeAction([]byte(c.body))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("DecodeAction(%s) = %v, want a *ValidationError", c.body, err)
			continue
		}
		if ve.Field != c.field || !strings.Contains(ve.Reason, c.contains) {
			t.Errorf("DecodeAction(%s) = field %q reason %q, want field %q containing %q", c.body, ve.Field, ve.Reason, c.field, c.contains)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("DecodeAction(%s) error is not ErrInvalid", c.body)
		}
	}
}

func TestBatchUnmarshalNamesFields(t *testing.T) {
	var req struct {
		Actions    Batch `json:"actions"`
		Screenshot bool  `json:"screenshot"`
	}
	if err := json.Unmarshal([]byte(`{"actions":[{"action":"click","x":1,"y":2},{"action":"screenshot"}],"screenshot":true}`), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Actions) != 2 || !req.Screenshot || req.Actions[0].Kind != KindClick {
		t.Errorf("got %+v", req)
	}
	for _, c := range []struct{ body, field string }{
		{`{"actions":{}}`, "actions"},
		{`{"actions":[{"action":"click","x":"1","y":2}]}`, "actions[0].x"},
		{`{"actions":[{"action":"screenshot"},{"action":"jump"}]}`, "actions[1].action"},
	} {
		req.Actions = nil
		err := json.Unmarshal([]byte(c.body), &req)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("Unmarshal(%s) = %v, want an error on %q", c.body, err, c.field)
		}
	}
	if err := json.Unmarshal([]byte(`{"actions":null}`), &req); err != nil || req.Actions != nil {
		t.Errorf("null actions: %v, %v", req.Actions, err)
	}
}

func TestDecodeBatchNamesTheIndex(t *testing.T) {
	_, err := DecodeBatch([]byte(`[{"action":"screenshot"},{"action":"key","chord":5}]`))
	if err == nil || err.Error() != "actions[1].chord: must be a string, got a number" {
		t.Errorf("err = %v", err)
	}
}
