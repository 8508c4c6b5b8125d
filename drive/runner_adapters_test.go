package drive

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// The vendor adapters (input) end to end: a call decoded, run, and
// answered in the vendor's form.

// TestAnthropicEndToEnd runs translated calls in a declared 640x400 space
// over a 1280x800 desktop and checks the input and the tool_result.
func TestAnthropicEndToEnd(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	declared := scaleSpace{w: 640, h: 400, factor: 2}
	do := func(body string) (input.AnthropicCall, input.BatchResult, error) {
		t.Helper()
		call, err := input.DecodeAnthropic([]byte(body))
		if err != nil {
			t.Fatalf("DecodeAnthropic(%s): %v", body, err)
		}
		res, err := r.Run(context.Background(), call.Batch, runOptions{Space: declared, Screenshot: call.WantsScreenshot()})
		return call, res, err
	}

	call, res, err := do(`{"action":"left_click","coordinate":[320,200],"text":"shift"}`)
	if err != nil {
		t.Fatal(err)
	}
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{key("shift", true)}, []desktop.InputEvent{mv(640, 400)},
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{btn("left", false)},
		[]desktop.InputEvent{key("shift", false)},
	)
	if !res.Screenshot {
		t.Error("a click should ask for a screenshot")
	}
	img := &input.Image{MediaType: "image/png", Data: []byte("\x89PNG")}
	got, _ := json.Marshal(input.NewAnthropicToolResult("toolu_1", call, res, nil, img))
	const wantImage = `{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}}]}`
	if string(got) != wantImage {
		t.Errorf("tool_result\n got %s\nwant %s", got, wantImage)
	}

	call, res, err = do(`{"action":"cursor_position"}`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Screenshot {
		t.Error("cursor_position should not ask for a screenshot")
	}
	got, _ = json.Marshal(input.NewAnthropicToolResult("toolu_2", call, res, nil, nil))
	const wantText = `{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"X=320,Y=200"}]}`
	if string(got) != wantText {
		t.Errorf("tool_result\n got %s\nwant %s", got, wantText)
	}

	call, res, err = do(`{"action":"mouse_move","coordinate":[700,10]}`)
	if !errors.Is(err, input.ErrInvalid) {
		t.Fatalf("out of the declared space: err = %v", err)
	}
	tr := input.NewAnthropicToolResult("toolu_3", call, res, err, nil)
	if !tr.IsError || len(tr.Content) != 1 || !strings.HasPrefix(tr.Content[0].Text, "Error: coordinate: 700 is outside the 640x400") {
		t.Errorf("error tool_result = %+v", tr)
	}
}

// TestOpenAIEndToEnd runs a GA batch in a 640x400 screenshot space over a
// 1280x800 desktop and checks the input and the computer_call_output.
func TestOpenAIEndToEnd(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	call, err := input.DecodeOpenAI([]byte(`{"type":"computer_call","id":"cu_9","call_id":"call_9","actions":[
		{"type":"click","button":"left","x":0,"y":399,"keys":["CTRL"]},
		{"type":"keypress","keys":["CTRL","L"]},
		{"type":"scroll","x":10,"y":10,"scroll_x":0,"scroll_y":-200}],
		"pending_safety_checks":[{"id":"cu_sc_1","code":"malicious_instructions","message":"careful"},{"id":"cu_sc_2","code":"irrelevant_domain"}]}`), input.OpenAIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), call.Batch, runOptions{Space: scaleSpace{640, 400, 2}, Screenshot: true})
	if err != nil {
		t.Fatal(err)
	}
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{key("ctrl", true)}, []desktop.InputEvent{mv(0, 798)},
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{btn("left", false)},
		[]desktop.InputEvent{key("ctrl", false)},
		tap("ctrl", "l"),
		[]desktop.InputEvent{mv(20, 20)},
		[]desktop.InputEvent{btn("wheel-up", true)}, []desktop.InputEvent{btn("wheel-up", false)},
		[]desktop.InputEvent{btn("wheel-up", true)}, []desktop.InputEvent{btn("wheel-up", false)},
	)
	if !res.Screenshot {
		t.Error("no trailing screenshot wanted")
	}
	out := input.NewOpenAIOutput(call, input.Image{MediaType: "image/png", Data: []byte("\x89PNG")}, func(c input.OpenAISafetyCheck) bool {
		return c.Code == "malicious_instructions"
	}, "original")
	got, _ := json.Marshal(out)
	const want = `{"type":"computer_call_output","call_id":"call_9","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,iVBORw==","detail":"original"},"acknowledged_safety_checks":[{"id":"cu_sc_1","code":"malicious_instructions","message":"careful"}]}`
	if string(got) != want {
		t.Errorf("computer_call_output\n got %s\nwant %s", got, want)
	}
}
