package input

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// OpenAI's computer tool sends a computer_call output item: the preview tool
// (computer_use_preview) with one "action", the GA tool ("computer") with an
// "actions" array run in order:
//
//	{"type": "computer_call", "id": "cu_1", "call_id": "call_1",
//	 "actions": [{"type": "click", "button": "left", "x": 10, "y": 20, "keys": ["SHIFT"]}],
//	 "pending_safety_checks": [], "status": "completed"}
//
// Coordinates are in the space of the screenshots sent back (the preview
// tool's declared display_width x display_height), which the caller passes
// to Run as the Space.
//
// Decisions where the schema leaves room (sources: the openai-python types
// response_computer_tool_call.py, computer_action.py,
// response_computer_tool_call_output_item.py; OpenAI's computer use guide;
// openai-cua-sample-app):
//   - scroll_x and scroll_y are pixels (the sample app passes them to
//     window.scrollBy); they become wheel notches at PixelsPerNotch, rounded
//     to nearest, and any non-zero distance scrolls at least one notch.
//   - button "wheel" is the middle button; "middle" is accepted too.
//   - keypress keys are one chord, pressed in order and released in
//     reverse, as the sample app does; "/" and "\" are the slash and
//     backslash keys (the sample maps "/" to the keypad's Divide, which
//     types the same character but is not what the US layout's key is).
//   - wait has no duration in the schema: it waits WaitDuration.
//   - Unknown fields are ignored (the schema grows, e.g. "keys" on pointer
//     actions); wrong-typed known fields are errors.
//   - The output is {"type": "computer_screenshot", "image_url": "data:..."},
//     the schema's ResponseComputerToolCallOutputScreenshot, which has no
//     "detail" (the SDK types and the published OpenAPI schema of
//     2026-08); a caller that wants one (the guide's "original") asks for
//     it, and it is passed on as given.
//   - A call with pending_safety_checks runs only when the caller says a
//     person acknowledged every one (Unconfirmed); its output then lists
//     them in acknowledged_safety_checks, which is how the API hears of
//     it.

// DefaultPixelsPerNotch converts OpenAI scroll pixels to wheel notches: web
// pages see one wheel notch as about 100 pixels of deltaY in Chromium.
const DefaultPixelsPerNotch = 100

// DefaultOpenAIWait is how long an OpenAI wait action waits, as in OpenAI's
// sample app.
const DefaultOpenAIWait = time.Second

// OpenAIOptions tune the OpenAI translation.
type OpenAIOptions struct {
	// PixelsPerNotch is how many scroll pixels make one wheel notch; 0
	// selects DefaultPixelsPerNotch.
	PixelsPerNotch int
	// WaitDuration is what a wait action waits; 0 selects
	// DefaultOpenAIWait.
	WaitDuration time.Duration
}

// OpenAISafetyCheck is a pending or acknowledged safety check.
type OpenAISafetyCheck struct {
	ID      string `json:"id"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// OpenAICall is a translated computer_call item.
type OpenAICall struct {
	ID     string
	CallID string
	// Batched is true for the GA "actions" form, false for a single
	// "action".
	Batched bool
	Batch   Batch
	// PendingSafetyChecks must each be acknowledged by a person before the
	// call runs (Unconfirmed); the output lists them acknowledged.
	PendingSafetyChecks []OpenAISafetyCheck
}

// Unconfirmed is the call's refusal when a pending safety check is not
// acknowledged (acknowledge nil acknowledges none), nil when it may run:
// the rule Gemini's require_confirmation calls run by.
func (c OpenAICall) Unconfirmed(acknowledge func(OpenAISafetyCheck) bool) error {
	flags := make([]safetyFlag, len(c.PendingSafetyChecks))
	for i, sc := range c.PendingSafetyChecks {
		flag := sc.ID
		if sc.Code != "" {
			flag += " " + sc.Code
		}
		if sc.Message != "" {
			flag += " (" + sc.Message + ")"
		}
		flags[i] = safetyFlag{field: "pending_safety_checks[" + strconv.Itoa(i) + "]", flag: flag, confirmed: acknowledge != nil && acknowledge(sc)}
	}
	return safetyRule(flags, "acknowledge_safety_checks=all (or a comma-separated list of the checks' ids)")
}

// DecodeOpenAI translates a computer_call item. Errors are *ValidationError
// values naming the item's own fields ("actions[2].scroll_y").
func DecodeOpenAI(item []byte, opts OpenAIOptions) (OpenAICall, error) {
	if opts.PixelsPerNotch <= 0 {
		opts.PixelsPerNotch = DefaultPixelsPerNotch
	}
	if opts.WaitDuration <= 0 {
		opts.WaitDuration = DefaultOpenAIWait
	}
	o, err := parseObject(item, "")
	if err != nil {
		return OpenAICall{}, err
	}
	var call OpenAICall
	typ, ok, err := o.str("type")
	if err != nil {
		return OpenAICall{}, err
	}
	if ok && typ != "computer_call" {
		return OpenAICall{}, Invalid("type", "must be computer_call, got %q", typ)
	}
	if call.ID, _, err = o.str("id"); err != nil {
		return OpenAICall{}, err
	}
	if call.CallID, ok, err = o.str("call_id"); err != nil {
		return OpenAICall{}, err
	}
	if !ok || call.CallID == "" {
		return OpenAICall{}, Invalid("call_id", "required")
	}
	if call.PendingSafetyChecks, err = openAISafetyChecks(o, "pending_safety_checks"); err != nil {
		return OpenAICall{}, err
	}

	_, hasOne := o.fields["action"]
	items, hasMany, err := o.array("actions")
	if err != nil {
		return OpenAICall{}, err
	}
	switch {
	case hasOne && hasMany:
		return OpenAICall{}, Invalid("actions", "give either action or actions, not both")
	case hasOne:
		a, err := openAIAction(o.fields["action"], "action", opts)
		if err != nil {
			return OpenAICall{}, err
		}
		call.Batch = Batch{a}
	case hasMany:
		call.Batched = true
		if len(items) == 0 {
			return OpenAICall{}, Invalid("actions", "no actions given")
		}
		for i, raw := range items {
			a, err := openAIAction(raw, "actions["+strconv.Itoa(i)+"]", opts)
			if err != nil {
				return OpenAICall{}, err
			}
			call.Batch = append(call.Batch, a)
		}
	default:
		return OpenAICall{}, Invalid("action", "required (or actions)")
	}
	return call, nil
}

func openAISafetyChecks(o object, key string) ([]OpenAISafetyCheck, error) {
	items, ok, err := o.array(key)
	if !ok || err != nil {
		return nil, err
	}
	checks := make([]OpenAISafetyCheck, 0, len(items))
	for i, raw := range items {
		co, err := parseObject(raw, fieldPath(o.field(key), "["+strconv.Itoa(i)+"]"))
		if err != nil {
			return nil, err
		}
		var c OpenAISafetyCheck
		var has bool
		if c.ID, has, err = co.str("id"); err != nil {
			return nil, err
		}
		if !has {
			return nil, Invalid(co.field("id"), "required")
		}
		if c.Code, _, err = co.str("code"); err != nil {
			return nil, err
		}
		if c.Message, _, err = co.str("message"); err != nil {
			return nil, err
		}
		checks = append(checks, c)
	}
	return checks, nil
}

func openAIActionTypes() []string {
	return []string{"click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait"}
}

func openAIAction(raw json.RawMessage, path string, opts OpenAIOptions) (Action, error) {
	o, err := parseObject(raw, path)
	if err != nil {
		return Action{}, err
	}
	typ, ok, err := o.str("type")
	if err != nil {
		return Action{}, err
	}
	if !ok {
		return Action{}, Invalid(o.field("type"), "required")
	}
	keys, _, err := o.strs("keys")
	if err != nil {
		return Action{}, err
	}
	xy := func() (*Point, error) {
		p, err := decodeXY(o)
		if err == nil && p == nil {
			err = Invalid(o.field("x"), "required by %s", typ)
		}
		return p, err
	}
	switch typ {
	case "screenshot":
		return Action{Kind: KindScreenshot}, nil
	case "wait":
		return Action{Kind: KindWait, Duration: opts.WaitDuration}, nil
	case "click", "double_click":
		at, err := xy()
		if err != nil {
			return Action{}, err
		}
		b, err := openAIButton(o)
		if err != nil {
			return Action{}, err
		}
		count := 1
		if typ == "double_click" {
			count = 2
		}
		return Action{Kind: KindClick, At: at, Button: b, Count: count, Modifiers: keys}, nil
	case "move":
		at, err := xy()
		if err != nil {
			return Action{}, err
		}
		return Action{Kind: KindMove, At: at, Modifiers: keys}, nil
	case "drag":
		path, err := openAIPath(o)
		if err != nil {
			return Action{}, err
		}
		return Action{Kind: KindDrag, Path: path, Button: ButtonLeft, Modifiers: keys}, nil
	case "scroll":
		at, err := xy()
		if err != nil {
			return Action{}, err
		}
		sx, _, err := o.integer("scroll_x")
		if err != nil {
			return Action{}, err
		}
		sy, _, err := o.integer("scroll_y")
		if err != nil {
			return Action{}, err
		}
		return Action{
			Kind: KindScroll, At: at, Modifiers: keys,
			DX: pixelsToNotches(sx, opts.PixelsPerNotch),
			DY: pixelsToNotches(sy, opts.PixelsPerNotch),
		}, nil
	case "type":
		text, ok, err := o.str("text")
		if err != nil {
			return Action{}, err
		}
		if !ok {
			return Action{}, Invalid(o.field("text"), "required by type")
		}
		return Action{Kind: KindType, Text: text}, nil
	case "keypress":
		if len(keys) == 0 {
			return Action{}, Invalid(o.field("keys"), "required by keypress: at least one key")
		}
		for i, k := range keys {
			if k == "" {
				return Action{}, Invalid(fieldPath(o.field("keys"), "["+strconv.Itoa(i)+"]"), "empty key name")
			}
		}
		// splitChord reads a lone "+" part as the plus key, so joining
		// with "+" keeps ["CTRL", "+"] intact.
		return Action{Kind: KindKey, Chord: strings.Join(keys, "+")}, nil
	}
	return Action{}, Invalid(o.field("type"), "unknown action %q (known: %s)", typ, strings.Join(openAIActionTypes(), ", "))
}

func openAIButton(o object) (Button, error) {
	b, ok, err := o.str("button")
	if err != nil || !ok {
		return ButtonLeft, err
	}
	switch b {
	case "left":
		return ButtonLeft, nil
	case "right":
		return ButtonRight, nil
	case "wheel", "middle":
		return ButtonMiddle, nil
	case "back":
		return ButtonBack, nil
	case "forward":
		return ButtonForward, nil
	}
	return "", Invalid(o.field("button"), "must be left, right, wheel, back or forward, got %q", b)
}

// openAIPath reads a drag path of {x, y} objects (the schema's form) or
// [x, y] pairs.
func openAIPath(o object) ([]Point, error) {
	items, ok, err := o.array("path")
	if err != nil {
		return nil, err
	}
	if !ok || len(items) == 0 {
		return nil, Invalid(o.field("path"), "required by drag: at least one point")
	}
	path := make([]Point, 0, len(items))
	for i, raw := range items {
		field := fieldPath(o.field("path"), "["+strconv.Itoa(i)+"]")
		if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
			xy, err := parseInts(raw, 2, field)
			if err != nil {
				return nil, err
			}
			path = append(path, Point{X: xy[0], Y: xy[1]})
			continue
		}
		po, err := parseObject(raw, field)
		if err != nil {
			return nil, err
		}
		p, err := decodeXY(po)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, Invalid(po.field("x"), "required")
		}
		path = append(path, *p)
	}
	return path, nil
}

// pixelsToNotches converts a scroll distance in pixels to wheel notches,
// rounding to nearest but never turning a non-zero distance into nothing.
func pixelsToNotches(px, perNotch int) int {
	if px == 0 {
		return 0
	}
	n := (abs(px) + perNotch/2) / perNotch
	if n == 0 {
		n = 1
	}
	if px < 0 {
		return -n
	}
	return n
}

// OpenAIScreenshot is a computer_call_output's output.
type OpenAIScreenshot struct {
	Type     string `json:"type"` // "computer_screenshot"
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail,omitempty"`
}

// OpenAIComputerCallOutput is the computer_call_output item that answers a
// computer_call.
type OpenAIComputerCallOutput struct {
	Type                     string              `json:"type"` // "computer_call_output"
	CallID                   string              `json:"call_id"`
	Output                   OpenAIScreenshot    `json:"output"`
	AcknowledgedSafetyChecks []OpenAISafetyCheck `json:"acknowledged_safety_checks"`
}

// OpenAIDetails are the values of an image's detail in OpenAI's schema.
var OpenAIDetails = []string{"auto", "low", "high", "original"}

// NewOpenAIOutput builds the computer_call_output for call with the
// screenshot taken after it, echoing call_id, with detail when it is not
// "". acknowledge decides, for each pending safety check, whether it is
// listed acknowledged; nil lists none. (A call runs only once every check
// is: Unconfirmed.)
func NewOpenAIOutput(call OpenAICall, img Image, acknowledge func(OpenAISafetyCheck) bool, detail string) OpenAIComputerCallOutput {
	out := OpenAIComputerCallOutput{
		Type:   "computer_call_output",
		CallID: call.CallID,
		Output: OpenAIScreenshot{
			Type:     "computer_screenshot",
			ImageURL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
		},
		AcknowledgedSafetyChecks: []OpenAISafetyCheck{},
	}
	out.Output.Detail = detail
	if acknowledge != nil {
		for _, c := range call.PendingSafetyChecks {
			if acknowledge(c) {
				out.AcknowledgedSafetyChecks = append(out.AcknowledgedSafetyChecks, c)
			}
		}
	}
	return out
}

// OpenAIErrorText renders an error from DecodeOpenAI or Run in the item's
// own field names ("actions[1].scroll_y" rather than "actions[1].dy").
func OpenAIErrorText(call OpenAICall, err error) string {
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "actions[") {
		return err.Error()
	}
	head, field, _ := strings.Cut(ve.Field, "].")
	head += "]"
	if !call.Batched {
		head = "action"
	}
	name, rest, _ := strings.Cut(field, ".")
	base, index, hasIndex := strings.Cut(name, "[")
	switch base {
	case "dx":
		base = "scroll_x"
	case "dy":
		base = "scroll_y"
	case "chord", "modifiers":
		base = "keys"
	}
	name = base
	if hasIndex {
		name += "[" + index
	}
	if rest != "" {
		name += "." + rest
	}
	if name == "" {
		return head + ": " + ve.Reason
	}
	return head + "." + name + ": " + ve.Reason
}
