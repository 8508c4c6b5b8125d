package web

import (
	"errors"
	"image"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

func TestDecodeBatchRequest(t *testing.T) {
	r, err := decodeBatchRequest([]byte(`{"actions": [{"action": "click", "x": 1, "y": 2}], "screenshot": true,
		"settle_ms": 0, "timeout_ms": 1500, "display_width": 640, "display_height": 400, "format": "JPG", "quality": 70, "cursor": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Batch) != 1 || !r.Screenshot || r.Settle != 0 || r.SettleTimeout != 1500*time.Millisecond ||
		r.Display != image.Pt(640, 400) || r.Format != screenshot.JPEG || r.Quality != 70 || !r.Cursor || !r.MidShots {
		t.Errorf("decoded %+v", r)
	}
	r, err = decodeBatchRequest([]byte(`{"actions": [{"action": "screenshot"}]}`))
	if err != nil || r.Settle != screenshot.DefaultQuiet || r.SettleTimeout != drive.DefaultSettleTimeout || r.Format != screenshot.PNG || r.Display != (image.Point{}) {
		t.Errorf("defaults %+v %v", r, err)
	}
	for body, field := range map[string]string{
		`{"actions": null}`:           "actions",
		`{}`:                          "actions",
		`{"actions": []}`:             "actions",
		`{"actions": [{"x": 1}]}`:     "actions[0].action",
		`{"actions": 5}`:              "actions",
		`{"actions": [], "bogus": 1}`: "bogus",
		// Counts that would wrap around once made durations.
		`{"actions": [{"action": "screenshot"}], "settle_ms": 9223372036855}`:   "settle_ms",
		`{"actions": [{"action": "screenshot"}], "timeout_ms": 9223372036855}`:  "timeout_ms",
		`{"actions": [{"action": "screenshot"}], "reaction_ms": 9223372036855}`: "reaction_ms",
		`{"actions": [{"action": "screenshot"}], "settle_ms": -1}`:              "settle_ms",
	} {
		_, err := decodeBatchRequest([]byte(body))
		var ve *input.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v, want a field error on %q", body, err, field)
		}
	}
}

func TestDecodeControlBatchNamesFields(t *testing.T) {
	cases := map[string]string{
		`{"id": "1", "type": "actions", "actions": [{"action": "screenshot"}], "settle_ms": "x"}`: "settle_ms",
		`{"id": "1", "type": "actions", "actions": [{"action": "screenshot"}], "bogus": 1}`:       "bogus",
		`{"id": 1, "type": "actions", "actions": [{"action": "screenshot"}]}`:                     "id",
	}
	for msg, field := range cases {
		_, err := decodeControlBatch([]byte(msg))
		var ve *input.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v, want a field error on %q", msg, err, field)
		}
	}
}

// checkDecoded holds for every batch request the decoder accepts: the
// bounds that the run depends on are met.
func checkDecoded(t *testing.T, r drive.Request, err error) {
	if err != nil {
		var ve *input.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("error %T %v is not a field error", err, err)
		}
		return
	}
	if len(r.Batch) == 0 || r.Settle < 0 || r.Settle > drive.MaxSettle || r.SettleTimeout < 0 || r.SettleTimeout > drive.MaxSettleTimeout {
		t.Fatalf("accepted %+v", r)
	}
	if (r.Display.X == 0) != (r.Display.Y == 0) || r.Display.X < 0 || r.Display.Y < 0 {
		t.Fatalf("accepted display %v", r.Display)
	}
	if r.Format != screenshot.PNG && r.Format != screenshot.JPEG {
		t.Fatalf("accepted format %q", r.Format)
	}
	if err := input.Validate(r.Batch, input.ValidateOptions{Space: input.NativeSpace{Width: 1280, Height: 800}, HasGuest: true}); err != nil {
		var ve *input.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("validation error %T %v is not a field error", err, err)
		}
	}
}

var batchSeeds = []string{
	`{"actions": [{"action": "click", "x": 1, "y": 2, "button": "right", "count": 2, "modifiers": ["ctrl"]}], "screenshot": true}`,
	`{"actions": [{"action": "type", "text": "naïve café 日本語 🙂"}, {"action": "key", "chord": "Return"}], "settle_ms": 500, "timeout_ms": 3000}`,
	`{"actions": [{"action": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}]}], "display_width": 640, "display_height": 400}`,
	`{"actions": [{"action": "zoom", "region": [0, 0, 10, 10]}], "format": "jpeg", "quality": 50}`,
	`{"actions": [{"action": "scroll", "x": 1, "y": 1, "dy": -3}, {"action": "wait", "duration": 0.5}]}`,
	`{"actions": []}`, `{"actions": null}`, `{}`, `[]`, `{"actions": [{}]}`, `{"settle_ms": -1, "actions": [{"action": "screenshot"}]}`,
}

func FuzzDecodeBatchRequest(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeBatchRequest(data)
		checkDecoded(t, r, err)
	})
}

func FuzzDecodeControlBatch(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"id": "a", "type": "actions", "stream": true, "actions": [{"action": "screenshot"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeControlBatch(data)
		checkDecoded(t, r, err)
	})
}

func FuzzDecodeAnthropicBody(f *testing.F) {
	for _, s := range []string{
		`{"action": "left_click", "coordinate": [10, 20], "text": "shift"}`,
		`{"type": "tool_use", "id": "toolu_1", "name": "computer", "input": {"action": "screenshot"}}`,
		`{"type": "tool_use", "id": "toolu_2", "name": "left_click", "input": {"coordinate": [1, 2]}}`,
		`{"type": "tool_use", "id": "toolu_3", "name": "computer"}`,
		`{"action": "scroll", "coordinate": [5, 5], "scroll_direction": "down", "scroll_amount": 3}`,
		`{"type": "tool_use", "input": "x"}`, `{"type": 1}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		call, _, err := decodeAnthropicBody(data)
		if err != nil {
			if !errors.Is(err, input.ErrInvalid) {
				t.Fatalf("error %T %v does not match input.ErrInvalid", err, err)
			}
			return
		}
		if len(call.Batch) == 0 || call.Action == "" {
			t.Fatalf("accepted %+v", call)
		}
	})
}

func TestMsParamRefusesCountsThatWrap(t *testing.T) {
	for _, v := range []string{"9223372036855", "-9223372036855", "99999999999999999999", "1.5", "x"} {
		if d, err := msParam(v, 0, 0, time.Minute); err == nil {
			t.Errorf("msParam(%q) = %v, want an error", v, d)
		}
	}
	if d, err := msParam("250", 0, 0, time.Minute); err != nil || d != 250*time.Millisecond {
		t.Errorf("msParam(250) = %v, %v", d, err)
	}
}
