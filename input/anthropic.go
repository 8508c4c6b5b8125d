package input

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Anthropic's computer tool (computer_20241022, computer_20250124,
// computer_20251124; the computer_toolset_20260801 members take the same
// input with the action as the tool name) sends the input of a tool_use
// block such as
//
//	{"action": "left_click", "coordinate": [640, 400], "text": "shift"}
//
// Coordinates are in the space of the declared display_width_px x
// display_height_px, which the caller passes to Run as the Space.
//
// Decisions where the schema leaves room (sources: the tool's published
// input schema, Anthropic's computer-use-demo tools/computer.py):
//   - Clicks and scroll take modifier keys in "text" (the documented
//     parameter); the demo's code reads "key" for clicks, so "key" is
//     accepted too.
//   - A "key" text is xdotool key syntax: several chords separated by
//     spaces ("ctrl+a Delete") press one after another.
//   - left_click_drag without start_coordinate (computer_20241022) drags
//     from the current pointer position.
//   - left_mouse_down/up may carry a coordinate (moved to first); clicks
//     and scroll without one act where the pointer is.
//   - Unknown fields are ignored, so a newer tool version's extra field
//     does not break an agent; wrong-typed known fields are errors.

// AnthropicCall is a translated computer tool_use input.
type AnthropicCall struct {
	// Action is the tool's action name, e.g. "left_click".
	Action string
	// Batch is the same request in the canonical vocabulary.
	Batch Batch
}

// WantsScreenshot says whether the tool_result should carry a screenshot:
// after every action but cursor_position, as the reference implementation
// does. Pass it as drive.Request.Screenshot.
func (c AnthropicCall) WantsScreenshot() bool { return c.Action != "cursor_position" }

// AnthropicActions lists the computer tool's actions across versions (the
// computer toolset's members are the same names).
func AnthropicActions() []string {
	return []string{
		"key", "type", "mouse_move", "left_click", "left_click_drag", "right_click",
		"middle_click", "double_click", "triple_click", "screenshot", "cursor_position",
		"left_mouse_down", "left_mouse_up", "scroll", "hold_key", "wait", "zoom",
	}
}

// DecodeAnthropic translates the input of an Anthropic computer tool_use
// block. Errors are *ValidationError values naming the tool's own fields.
func DecodeAnthropic(input []byte) (AnthropicCall, error) {
	return decodeAnthropic(input, "")
}

// DecodeAnthropicMember translates a computer_toolset member call, whose
// tool_use name (e.g. "left_click") is the action and whose input may omit
// "action".
func DecodeAnthropicMember(name string, input []byte) (AnthropicCall, error) {
	return decodeAnthropic(input, name)
}

func decodeAnthropic(input []byte, member string) (AnthropicCall, error) {
	o, err := parseObject(input, "")
	if err != nil {
		return AnthropicCall{}, err
	}
	action, ok, err := o.str("action")
	if err != nil {
		return AnthropicCall{}, err
	}
	switch {
	case member != "" && ok && action != member:
		return AnthropicCall{}, Invalid("action", "%q does not match the tool name %q", action, member)
	case member != "":
		action = member
	case !ok:
		return AnthropicCall{}, Invalid("action", "required")
	}
	batch, err := anthropicBatch(o, action)
	if err != nil {
		return AnthropicCall{}, err
	}
	return AnthropicCall{Action: action, Batch: batch}, nil
}

func anthropicBatch(o object, action string) (Batch, error) {
	at, err := anthropicPoint(o, "coordinate")
	if err != nil {
		return nil, err
	}
	text, hasText, err := o.str("text")
	if err != nil {
		return nil, err
	}
	// mods reads the modifier keys held around a click, drag or scroll.
	mods := func() ([]string, error) {
		src, field := text, "text"
		if !hasText {
			key, hasKey, kerr := o.str("key")
			if kerr != nil || !hasKey {
				return nil, kerr
			}
			src, field = key, "key"
		}
		if strings.TrimSpace(src) == "" {
			return nil, nil
		}
		names, serr := splitChord(strings.TrimSpace(src))
		return names, withPrefix(serr, field)
	}
	needText := func() error {
		if !hasText {
			return Invalid("text", "required by %s", action)
		}
		return nil
	}

	switch action {
	case "screenshot":
		return Batch{{Kind: KindScreenshot}}, nil
	case "cursor_position":
		return Batch{{Kind: KindCursorPosition}}, nil
	case "mouse_move":
		if at == nil {
			return nil, Invalid("coordinate", "required by mouse_move")
		}
		return Batch{{Kind: KindMove, At: at}}, nil
	case "left_click", "right_click", "middle_click", "double_click", "triple_click":
		m, err := mods()
		if err != nil {
			return nil, err
		}
		a := Action{Kind: KindClick, At: at, Button: ButtonLeft, Count: 1, Modifiers: m}
		switch action {
		case "right_click":
			a.Button = ButtonRight
		case "middle_click":
			a.Button = ButtonMiddle
		case "double_click":
			a.Count = 2
		case "triple_click":
			a.Count = 3
		}
		return Batch{a}, nil
	case "left_click_drag":
		if at == nil {
			return nil, Invalid("coordinate", "required by left_click_drag")
		}
		start, err := anthropicPoint(o, "start_coordinate")
		if err != nil {
			return nil, err
		}
		m, err := mods()
		if err != nil {
			return nil, err
		}
		path := []Point{*at}
		if start != nil {
			path = []Point{*start, *at}
		}
		return Batch{{Kind: KindDrag, Path: path, Button: ButtonLeft, Modifiers: m}}, nil
	case "left_mouse_down":
		return Batch{{Kind: KindMouseDown, At: at, Button: ButtonLeft}}, nil
	case "left_mouse_up":
		return Batch{{Kind: KindMouseUp, At: at, Button: ButtonLeft}}, nil
	case "scroll":
		return anthropicScroll(o, at, mods)
	case "type":
		if err := needText(); err != nil {
			return nil, err
		}
		return Batch{{Kind: KindType, Text: text}}, nil
	case "key":
		if err := needText(); err != nil {
			return nil, err
		}
		repeat, _, err := o.integer("repeat")
		if err != nil {
			return nil, err
		}
		chords := strings.Fields(text)
		if len(chords) == 0 {
			return nil, Invalid("text", "no key given")
		}
		batch := make(Batch, 0, len(chords))
		for _, c := range chords {
			batch = append(batch, Action{Kind: KindKey, Chord: c, Repeat: repeat})
		}
		return batch, nil
	case "hold_key":
		if err := needText(); err != nil {
			return nil, err
		}
		names, err := splitChord(strings.TrimSpace(text))
		if err != nil {
			return nil, withPrefix(err, "text")
		}
		d, ok, err := o.seconds("duration")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, Invalid("duration", "required by hold_key")
		}
		return Batch{{Kind: KindHoldKey, Keys: names, Duration: d}}, nil
	case "wait":
		d, ok, err := o.seconds("duration")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, Invalid("duration", "required by wait")
		}
		return Batch{{Kind: KindWait, Duration: d}}, nil
	case "zoom":
		r, ok, err := o.ints("region", 4)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, Invalid("region", "required by zoom")
		}
		return Batch{{Kind: KindZoom, Region: &Rect{X1: r[0], Y1: r[1], X2: r[2], Y2: r[3]}}}, nil
	}
	return nil, Invalid("action", "unknown action %q (known: %s)", action, strings.Join(AnthropicActions(), ", "))
}

func anthropicScroll(o object, at *Point, mods func() ([]string, error)) (Batch, error) {
	dir, ok, err := o.str("scroll_direction")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, Invalid("scroll_direction", "required by scroll")
	}
	amount, ok, err := o.integer("scroll_amount")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, Invalid("scroll_amount", "required by scroll")
	}
	if amount < 0 {
		return nil, Invalid("scroll_amount", "must not be negative, got %d", amount)
	}
	m, err := mods()
	if err != nil {
		return nil, err
	}
	dx, dy, ok := scrollToward(dir, amount)
	if !ok {
		return nil, Invalid("scroll_direction", "must be up, down, left or right, got %q", dir)
	}
	return Batch{{Kind: KindScroll, At: at, Modifiers: m, DX: dx, DY: dy}}, nil
}

func anthropicPoint(o object, key string) (*Point, error) {
	xy, ok, err := o.ints(key, 2)
	if err != nil || !ok {
		return nil, err
	}
	return &Point{X: xy[0], Y: xy[1]}, nil
}

// Image is an encoded screenshot for a tool result.
type Image struct {
	MediaType string // "image/png" or "image/jpeg"
	Data      []byte
}

// AnthropicBlock is a content block of a tool_result: text or a base64 image.
type AnthropicBlock struct {
	Type   string                `json:"type"`
	Text   string                `json:"text,omitempty"`
	Source *AnthropicImageSource `json:"source,omitempty"`
}

// AnthropicImageSource is the source of an image block.
type AnthropicImageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// AnthropicToolResult is the tool_result block that answers a tool_use.
type AnthropicToolResult struct {
	Type      string           `json:"type"` // "tool_result"
	ToolUseID string           `json:"tool_use_id"`
	Content   []AnthropicBlock `json:"content"`
	IsError   bool             `json:"is_error,omitempty"`
}

// NewAnthropicToolResult builds the tool_result for a call (see
// AnthropicContent); failures set is_error.
func NewAnthropicToolResult(toolUseID string, call AnthropicCall, res BatchResult, runErr error, img *Image) AnthropicToolResult {
	return AnthropicToolResult{
		Type:      "tool_result",
		ToolUseID: toolUseID,
		Content:   AnthropicContent(call, res, runErr, img),
		IsError:   runErr != nil,
	}
}

// Note adds a text block for each warning (what the server could not
// confirm, such as keys sent before the desktop was seen to take a
// click), after the screenshot: the model reads it with the picture, so an
// agent is not left to trust a screen that may not show its action yet.
func (r *AnthropicToolResult) Note(warnings []string) {
	for _, w := range warnings {
		r.Content = append(r.Content, AnthropicBlock{Type: "text", Text: "Note: " + w})
	}
}

// AnthropicContent builds a tool_result's content: for a failure (of
// decoding or of Run) a text block with the error in the tool's own field
// names; for cursor_position a text block "X=..,Y=.." in the declared space
// (the Space given to Run); otherwise the image, or a short text when the
// caller captured none.
func AnthropicContent(call AnthropicCall, res BatchResult, runErr error, img *Image) []AnthropicBlock {
	if runErr != nil {
		return []AnthropicBlock{{Type: "text", Text: "Error: " + anthropicErrorText(runErr)}}
	}
	if call.Action == "cursor_position" {
		for _, r := range res.Results {
			if r.Cursor != nil {
				return []AnthropicBlock{{Type: "text", Text: fmt.Sprintf("X=%d,Y=%d", r.Cursor.X, r.Cursor.Y)}}
			}
		}
	}
	if img != nil {
		return []AnthropicBlock{{Type: "image", Source: &AnthropicImageSource{
			Type:      "base64",
			MediaType: img.MediaType,
			Data:      base64.StdEncoding.EncodeToString(img.Data),
		}}}
	}
	return []AnthropicBlock{{Type: "text", Text: call.Action + " done"}}
}

// anthropicErrorText renames canonical fields in a validation error to the
// tool's parameters, so the model reads "coordinate", not "actions[0].x".
func anthropicErrorText(err error) string {
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "actions[") {
		return err.Error()
	}
	field := ve.Field
	if i := strings.Index(field, "]."); i >= 0 {
		field = field[i+2:]
	} else {
		field = ""
	}
	name, _, _ := strings.Cut(field, ".")
	name, _, _ = strings.Cut(name, "[")
	switch name {
	case "x", "y":
		field = "coordinate"
	case "path":
		field = "start_coordinate or coordinate"
	case "chord", "keys", "modifiers":
		field = "text"
	case "dx", "dy":
		field = "scroll_amount"
	case "repeat":
		field = "repeat"
	}
	if field == "" {
		return ve.Reason
	}
	return field + ": " + ve.Reason
}

// scrollToward turns a direction and a distance in wheel notches into a
// scroll's DX and DY; ok is false for a direction that is not up, down,
// left or right.
func scrollToward(dir string, n int) (dx, dy int, ok bool) {
	switch dir {
	case "up":
		return 0, -n, true
	case "down":
		return 0, n, true
	case "left":
		return -n, 0, true
	case "right":
		return n, 0, true
	}
	return 0, 0, false
}
