package input

import (
	"bytes"
	"encoding/json"
	"image"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Gemini's computer-use models call functions whose coordinates are on a
// 0–999 grid on each axis, whatever the screenshot's size:
//
//	{"name": "click_at", "args": {"y": 500, "x": 250}}
//
// Both environments' functions are translated: the desktop's (click,
// double_click, triple_click, middle_click, right_click, mouse_down,
// mouse_up, move, type, drag_and_drop, wait, press_key, hotkey,
// take_screenshot, scroll) and the browser's (open_web_browser, navigate,
// go_back, go_forward, search, click_at, hover_at, type_text_at,
// key_combination, scroll_document, scroll_at, drag_and_drop,
// wait_5_seconds). Sources: ai.google.dev's computer-use page and its
// reference implementation.
//
// Decisions where the schema leaves room:
//   - A grid value v maps to v*W/1000 in a W-wide space (the reference's
//     int(v/1000*W)); values outside 0–999 are errors.
//   - Scroll magnitudes are on the grid too: magnitude*H/1000 pixels (W for
//     left and right), then wheel notches at DefaultPixelsPerNotch, at
//     least one. magnitude_in_wheel_clicks is taken as notches.
//   - navigate and search open the page through Chromium's DevTools
//     (GeminiCall.Navigate), as the reference's page.goto does: typed into
//     the address bar (ctrl+l, the text, Return) under TCG, the URL's
//     first keys reached the page before the address bar took them. go_back
//     and go_forward are alt+Left and alt+Right; scroll_document up and down
//     are PageUp and PageDown, left and right scroll the wheel at the
//     screen's middle.
//   - The browser's own functions (open_web_browser, navigate, search,
//     go_back, go_forward: not in the desktop environment's list) are
//     refused on a desktop without a browser (GeminiEnv.Browser false):
//     typed anyway, their keys would land in whatever has focus, a URL
//     run as a shell command.
//   - A call's id comes back in its functionResponse, as the API matches
//     them by it; parts with "functionCall": null (an SDK's model_dump())
//     have no call.
//   - type_text_at clears with ctrl+a and Delete first when
//     clear_before_typing (default true), and presses Return after when
//     press_enter (default true); the desktop's type presses Return only
//     with press_enter (default false).
//   - key_down and key_up are refused: a key held across calls has no
//     place in a batch, which always ends with every key up.
//   - Unknown arguments are ignored (the API adds "intent" to every call);
//     wrong-typed known ones are errors naming them.

// GeminiGrid is the size of Gemini's coordinate grid on each axis.
const GeminiGrid = 1000

// DefaultGeminiSearchURL is where search goes, as in the reference.
const DefaultGeminiSearchURL = "https://www.google.com/"

// GeminiEnv is what a turn's calls are translated for.
type GeminiEnv struct {
	// Space is the size the grid maps onto.
	Space image.Point
	// SearchURL is where search goes; "" is DefaultGeminiSearchURL.
	SearchURL string
	// Browser says whether the desktop has a web browser (Chromium) for
	// the browser's own functions; without one they are refused.
	Browser bool
}

// GeminiCall is a translated function call.
type GeminiCall struct {
	Name string
	// ID is the call's id, when the API gave it one: its
	// functionResponse carries it back.
	ID    string
	Batch Batch
	// Navigate, for navigate and search, is the address the browser is
	// to open (through its DevTools) before the batch, which then only
	// pictures the page.
	Navigate string
	// Safety is the call's safety_decision, when it has one: a
	// require_confirmation decision must be acknowledged before it runs.
	Safety *GeminiSafetyDecision
}

// GeminiSafetyDecision is a call's safety_decision argument.
type GeminiSafetyDecision struct {
	Decision    string `json:"decision"`
	Explanation string `json:"explanation,omitempty"`
}

// NeedsConfirmation says whether the call may run only once a person
// confirmed it.
func (c GeminiCall) NeedsConfirmation() bool {
	return c.Safety != nil && c.Safety.Decision == "require_confirmation"
}

// unconfirmed is the call's refusal when it needs a person's confirmation
// and confirmed is false.
func (c GeminiCall) unconfirmed(confirmed bool) error {
	if !c.NeedsConfirmation() {
		return nil
	}
	flag := "require_confirmation"
	if c.Safety.Explanation != "" {
		flag += " (" + c.Safety.Explanation + ")"
	}
	return safetyRule([]safetyFlag{{field: "args.safety_decision", flag: flag, confirmed: confirmed}}, "acknowledge_safety=true")
}

// geminiFunctions lists the translated function names.
func geminiFunctions() []string {
	return []string{
		"click", "double_click", "triple_click", "middle_click", "right_click", "mouse_down", "mouse_up", "move",
		"type", "drag_and_drop", "wait", "press_key", "hotkey", "take_screenshot", "scroll",
		"open_web_browser", "navigate", "go_back", "go_forward", "search", "click_at", "hover_at",
		"type_text_at", "key_combination", "scroll_document", "scroll_at", "wait_5_seconds",
	}
}

// geminiBrowserOnly says whether a function is the browser's own: one the
// desktop environment does not have, that means nothing without a
// browser.
func geminiBrowserOnly(name string) bool {
	switch name {
	case "open_web_browser", "navigate", "search", "go_back", "go_forward":
		return true
	}
	return false
}

// DecodeGeminiCalls reads what a model turn asked for: one function call
// ({"name", "args"}, or wrapped as {"functionCall": ...} or
// {"function_call": ...}), an array of them, or a Content object
// ({"role": "model", "parts": [...]}) whose function-call parts are taken
// in order and other parts (text, thoughts) skipped. It returns each
// call's raw form; DecodeGemini translates one.
func DecodeGeminiCalls(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var items []json.RawMessage
	var content struct {
		Parts []json.RawMessage `json:"parts"`
	}
	if len(body) == 0 {
		return nil, Invalid("", "no function call given")
	}
	if body[0] == '[' {
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, Invalid("", "not an array of function calls: %v", err)
		}
	} else {
		if err := json.Unmarshal(body, &content); err != nil {
			return nil, Invalid("", "not a function call: %v", err)
		}
		if content.Parts == nil {
			items = []json.RawMessage{body}
		} else {
			items = content.Parts
		}
	}
	var calls []json.RawMessage
	for i, it := range items {
		path := ""
		switch {
		case content.Parts != nil:
			path = "parts[" + strconv.Itoa(i) + "]"
		case body[0] == '[':
			path = "[" + strconv.Itoa(i) + "]"
		}
		// A null field is an absent one (parseObject): an SDK's
		// model_dump() gives every part "functionCall": null but one.
		o, err := parseObject(it, path)
		if err != nil {
			return nil, err
		}
		camel, hasCamel := o.fields["functionCall"]
		snake, hasSnake := o.fields["function_call"]
		_, hasName := o.fields["name"]
		switch {
		case hasCamel && hasSnake:
			return nil, Invalid(o.field("function_call"), "give functionCall or function_call, not both")
		case hasCamel:
			calls = append(calls, camel)
		case hasSnake:
			calls = append(calls, snake)
		case hasName:
			calls = append(calls, it)
		}
	}
	if len(calls) == 0 {
		return nil, Invalid("", "no function call given")
	}
	return calls, nil
}

// geminiHead reads a call's name and id without translating it, for
// answering a call that failed to translate.
func geminiHead(raw json.RawMessage) (name, id string) {
	var c struct {
		Name, ID string
	}
	json.Unmarshal(raw, &c)
	return c.Name, c.ID
}

// DecodeGemini translates one function call into a batch for env: the
// grid is mapped onto env.Space. Errors are *ValidationError values naming
// the call's own arguments ("args.y").
func DecodeGemini(raw json.RawMessage, env GeminiEnv) (GeminiCall, error) {
	if env.SearchURL == "" {
		env.SearchURL = DefaultGeminiSearchURL
	}
	o, err := parseObject(raw, "")
	if err != nil {
		return GeminiCall{}, err
	}
	name, ok, err := o.str("name")
	if err != nil {
		return GeminiCall{}, err
	}
	if !ok || name == "" {
		return GeminiCall{}, Invalid("name", "required")
	}
	call := GeminiCall{Name: name}
	if call.ID, _, err = o.str("id"); err != nil {
		return GeminiCall{}, err
	}
	args := object{fields: map[string]json.RawMessage{}, path: "args"}
	if a, has := o.fields["args"]; has && string(bytes.TrimSpace(a)) != "null" {
		if args, err = parseObject(a, "args"); err != nil {
			return GeminiCall{}, err
		}
	}
	if sd, has := args.fields["safety_decision"]; has {
		var d GeminiSafetyDecision
		if err := json.Unmarshal(sd, &d); err != nil {
			return GeminiCall{}, Invalid(args.field("safety_decision"), "must be {decision, explanation}: %v", err)
		}
		call.Safety = &d
	}
	if geminiBrowserOnly(name) && !env.Browser {
		return GeminiCall{}, Invalid("name", "%s is a browser function and this desktop has no browser: nothing ran (its keys would have gone to whatever has focus); "+
			"create the desktop from a snapshot of the browser image (or of a recipe built from it), or use the desktop's own functions (click, type, press_key, hotkey)", name)
	}
	g := geminiArgs{o: args, space: env.Space}
	if call.Navigate, err = g.navigation(name, env.SearchURL); err != nil {
		return GeminiCall{}, err
	}
	call.Batch, err = g.batch(name, env.SearchURL)
	return call, err
}

type geminiArgs struct {
	o     object
	space image.Point
}

// coord reads one grid coordinate and maps it onto an axis of size n.
func (g geminiArgs) coord(key string, n int) (int, error) {
	v, ok, err := g.o.integer(key)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, Invalid(g.o.field(key), "required")
	}
	if v < 0 || v >= GeminiGrid {
		return 0, Invalid(g.o.field(key), "%d is off the 0-999 grid", v)
	}
	return v * n / GeminiGrid, nil
}

// point reads a point from the named x and y arguments.
func (g geminiArgs) point(xKey, yKey string) (*Point, error) {
	x, err := g.coord(xKey, g.space.X)
	if err != nil {
		return nil, err
	}
	y, err := g.coord(yKey, g.space.Y)
	if err != nil {
		return nil, err
	}
	return &Point{X: x, Y: y}, nil
}

func (g geminiArgs) text(key string) (string, error) {
	s, ok, err := g.o.str(key)
	if err == nil && !ok {
		err = Invalid(g.o.field(key), "required")
	}
	return s, err
}

func (g geminiArgs) flag(key string, def bool) (bool, error) {
	v, ok, err := g.o.boolean(key)
	if !ok {
		return def, err
	}
	return v, err
}

// navigation is the address navigate and search open, "" for other
// functions. A navigate URL without a scheme gets https://, as Google's
// reference client gives it ("example.com", "localhost:8000/x").
func (g geminiArgs) navigation(name, searchURL string) (string, error) {
	switch name {
	case "search":
		return searchURL, nil
	case "navigate":
		u, err := g.text("url")
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(u) == "" {
			return "", Invalid(g.o.field("url"), "empty: give the address to open")
		}
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || (p.Host == "" && !slices.Contains(schemesWithoutHost, p.Scheme)) {
			u = "https://" + u
		}
		return u, nil
	}
	return "", nil
}

// schemesWithoutHost are the schemes whose URLs have no host part, so a
// "localhost:8000" (scheme "localhost") is told from them.
var schemesWithoutHost = []string{"about", "data", "file", "javascript", "mailto", "view-source", "blob"}

func (g geminiArgs) batch(name, searchURL string) (Batch, error) {
	click := func(b Button, count int) (Batch, error) {
		at, err := g.point("x", "y")
		return Batch{{Kind: KindClick, At: at, Button: b, Count: count}}, err
	}
	switch name {
	case "click", "click_at":
		return click(ButtonLeft, 1)
	case "double_click":
		return click(ButtonLeft, 2)
	case "triple_click":
		return click(ButtonLeft, 3)
	case "middle_click":
		return click(ButtonMiddle, 1)
	case "right_click":
		return click(ButtonRight, 1)
	case "mouse_down", "mouse_up", "move", "hover_at":
		at, err := g.point("x", "y")
		kind := map[string]Kind{"mouse_down": KindMouseDown, "mouse_up": KindMouseUp, "move": KindMove, "hover_at": KindMove}[name]
		return Batch{{Kind: kind, At: at}}, err
	case "take_screenshot", "open_web_browser":
		// The browser image has Chromium open from the start.
		return Batch{{Kind: KindScreenshot}}, nil
	case "wait":
		secs, ok, err := g.o.integer("seconds")
		if err != nil {
			return nil, err
		}
		if !ok {
			secs = 1
		}
		if secs < 0 || secs > 60 {
			return nil, Invalid(g.o.field("seconds"), "%d: wait 0 to 60 seconds", secs)
		}
		return Batch{{Kind: KindWait, Duration: time.Duration(secs) * time.Second}}, nil
	case "wait_5_seconds":
		return Batch{{Kind: KindWait, Duration: 5 * time.Second}}, nil
	case "go_back":
		return Batch{{Kind: KindKey, Chord: "alt+Left"}}, nil
	case "go_forward":
		return Batch{{Kind: KindKey, Chord: "alt+Right"}}, nil
	case "search", "navigate":
		// The page is opened through Chromium's DevTools before the batch
		// (GeminiCall.Navigate); the batch pictures it.
		return Batch{{Kind: KindScreenshot}}, nil
	case "type":
		text, err := g.text("text")
		if err != nil {
			return nil, err
		}
		enter, err := g.flag("press_enter", false)
		b := Batch{{Kind: KindType, Text: text}}
		if enter {
			b = append(b, Action{Kind: KindKey, Chord: "Return"})
		}
		return b, err
	case "type_text_at":
		at, err := g.point("x", "y")
		if err != nil {
			return nil, err
		}
		text, err := g.text("text")
		if err != nil {
			return nil, err
		}
		clear, err := g.flag("clear_before_typing", true)
		if err != nil {
			return nil, err
		}
		enter, err := g.flag("press_enter", true)
		if err != nil {
			return nil, err
		}
		b := Batch{{Kind: KindClick, At: at}}
		if clear {
			b = append(b, Action{Kind: KindKey, Chord: "ctrl+a"}, Action{Kind: KindKey, Chord: "Delete"})
		}
		b = append(b, Action{Kind: KindType, Text: text})
		if enter {
			b = append(b, Action{Kind: KindKey, Chord: "Return"})
		}
		return b, nil
	case "press_key":
		key, err := g.text("key")
		return Batch{{Kind: KindKey, Chord: key}}, err
	case "key_combination":
		keys, err := g.text("keys")
		return Batch{{Kind: KindKey, Chord: keys}}, err
	case "hotkey":
		keys, ok, err := g.o.strs("keys")
		if err == nil && (!ok || len(keys) == 0) {
			err = Invalid(g.o.field("keys"), "required: at least one key")
		}
		return Batch{{Kind: KindKey, Chord: strings.Join(keys, "+")}}, err
	case "key_down", "key_up":
		return nil, Invalid("name", "%s is not supported: a key held across calls has no place in a batch, which ends with every key up; use hotkey or press_key", name)
	case "drag_and_drop":
		return g.drag()
	case "scroll", "scroll_at":
		return g.scroll(name)
	case "scroll_document":
		dir, err := g.text("direction")
		if err != nil {
			return nil, err
		}
		switch dir {
		case "up":
			return Batch{{Kind: KindKey, Chord: "Page_Up"}}, nil
		case "down":
			return Batch{{Kind: KindKey, Chord: "Page_Down"}}, nil
		case "left", "right":
			dx := -10
			if dir == "right" {
				dx = 10
			}
			return Batch{{Kind: KindScroll, At: &Point{X: g.space.X / 2, Y: g.space.Y / 2}, DX: dx}}, nil
		}
		return nil, Invalid(g.o.field("direction"), "must be up, down, left or right, got %q", dir)
	}
	return nil, Invalid("name", "unknown function %q (known: %s)", name, strings.Join(geminiFunctions(), ", "))
}

// drag reads the browser's (x, y, destination_x, destination_y) or the
// desktop's (start_x, start_y, end_x, end_y) arguments.
func (g geminiArgs) drag() (Batch, error) {
	from, to := [2]string{"x", "y"}, [2]string{"destination_x", "destination_y"}
	if _, desktop := g.o.fields["start_x"]; desktop {
		from, to = [2]string{"start_x", "start_y"}, [2]string{"end_x", "end_y"}
	}
	a, err := g.point(from[0], from[1])
	if err != nil {
		return nil, err
	}
	b, err := g.point(to[0], to[1])
	if err != nil {
		return nil, err
	}
	return Batch{{Kind: KindDrag, Path: []Point{*a, *b}, Button: ButtonLeft}}, nil
}

func (g geminiArgs) scroll(name string) (Batch, error) {
	at, err := g.point("x", "y")
	if err != nil {
		return nil, err
	}
	dir, err := g.text("direction")
	if err != nil {
		return nil, err
	}
	axis := g.space.Y
	if dir == "left" || dir == "right" {
		axis = g.space.X
	}
	notches := 0
	if clicks, ok, err := g.o.integer("magnitude_in_wheel_clicks"); err != nil {
		return nil, err
	} else if ok {
		notches = clicks
	} else {
		key, def := "magnitude", 800
		if name == "scroll" {
			key, def = "magnitude_in_pixels", 300
		}
		mag, ok, err := g.o.integer(key)
		if err != nil {
			return nil, err
		}
		if !ok {
			mag = def
		}
		if mag < 0 || mag >= GeminiGrid {
			return nil, Invalid(g.o.field(key), "%d is off the 0-999 grid", mag)
		}
		notches = pixelsToNotches(mag*axis/GeminiGrid, DefaultPixelsPerNotch)
	}
	if notches < 0 || notches > 100 {
		return nil, Invalid(g.o.field("magnitude_in_wheel_clicks"), "%d: scroll 0 to 100 wheel clicks", notches)
	}
	dx, dy, ok := scrollToward(dir, notches)
	if !ok {
		return nil, Invalid(g.o.field("direction"), "must be up, down, left or right, got %q", dir)
	}
	return Batch{{Kind: KindScroll, At: at, DX: dx, DY: dy}}, nil
}

// GeminiFunctionResponse is the functionResponse part that answers a call:
// a JSON response (url on a desktop with a browser, error, and
// safety_acknowledgement when the call needed one) and the screenshot as
// inline data.
type GeminiFunctionResponse struct {
	// ID is the call's id, so the API can match the two.
	ID       string             `json:"id,omitempty"`
	Name     string             `json:"name"`
	Response map[string]any     `json:"response"`
	Parts    []GeminiInlinePart `json:"parts,omitempty"`
}

// GeminiInlinePart is a part carrying inline data.
type GeminiInlinePart struct {
	InlineData GeminiBlob `json:"inlineData"`
}

// GeminiBlob is base64 data with its MIME type (encoding/json encodes the
// bytes as base64).
type GeminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

// GeminiPart is one part of the answer's Content.
type GeminiPart struct {
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiNotExecuted is the error of calls after a failed one in a turn.
const GeminiNotExecuted = "not executed: an earlier function call in this turn failed"

// GeminiState is what a call left: the screenshot after it, and on a
// desktop with a browser the URL of its page ("" when unknown).
type GeminiState struct {
	Screenshot *Image
	URL        string
	// Notes are what the call could not confirm (a picture taken before
	// the screen settled, keys sent unconfirmed): the response's "notes".
	Notes []string
}

// GeminiRun runs one translated call and returns its state and failure.
type GeminiRun func(call GeminiCall) (GeminiState, error)

// RunGeminiTurn translates and runs a turn's calls in order with run,
// stopping at the first that fails (to translate, to be confirmed, or to
// run); each later call answers GeminiNotExecuted. acknowledged says
// whether a person confirmed the turn's require_confirmation calls.
func RunGeminiTurn(calls []json.RawMessage, env GeminiEnv, acknowledged bool, run GeminiRun) (parts []GeminiPart, failed int) {
	answer := func(raw json.RawMessage, resp map[string]any) GeminiFunctionResponse {
		name, id := geminiHead(raw)
		return GeminiFunctionResponse{ID: id, Name: name, Response: resp}
	}
	// A turn that needs a person's confirmation runs nothing until it has
	// it: posted again once confirmed, no call of it runs twice.
	for i, raw := range calls {
		call, err := DecodeGemini(raw, env)
		if err != nil {
			continue
		}
		if err := call.unconfirmed(acknowledged); err != nil {
			for j, raw := range calls {
				msg := "not executed: a call of this turn needs a person's confirmation first"
				if j == i {
					msg = err.Error()
				}
				parts = append(parts, GeminiPart{answer(raw, map[string]any{"error": msg})})
			}
			return parts, i
		}
	}
	failed = -1
	for i, raw := range calls {
		resp := map[string]any{}
		fr := answer(raw, resp)
		if failed >= 0 {
			resp["error"] = GeminiNotExecuted
			parts = append(parts, GeminiPart{fr})
			continue
		}
		call, err := DecodeGemini(raw, env)
		if err == nil && call.NeedsConfirmation() {
			resp["safety_acknowledgement"] = "true"
		}
		var st GeminiState
		if err == nil {
			st, err = run(call)
		}
		if st.URL != "" {
			resp["url"] = st.URL
		}
		if len(st.Notes) > 0 {
			resp["notes"] = st.Notes
		}
		if err != nil {
			failed = i
			resp["error"] = err.Error()
		} else if img := st.Screenshot; img != nil {
			fr.Parts = []GeminiInlinePart{{InlineData: GeminiBlob{MimeType: img.MediaType, Data: img.Data}}}
		}
		parts = append(parts, GeminiPart{fr})
	}
	return parts, failed
}
