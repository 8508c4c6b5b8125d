// Package input is the vocabulary of computer-use actions: what an agent
// may ask of a desktop, decoded strictly, validated, and resolved to QEMU's
// names (qcodes, buttons, native pixels). It sends nothing and knows no
// desktop: drive runs the batches.
//
// Agents speak one of several vocabularies: the canonical one (Batch,
// DecodeBatch, Action), Anthropic's computer tool (DecodeAnthropic,
// NewAnthropicToolResult), OpenAI's computer tool (DecodeOpenAI,
// NewOpenAIOutput) or Gemini's computer-use functions (DecodeGeminiCalls).
// The adapters are thin translations into canonical Batches; Compile
// validates a whole Batch and resolves it into Steps, which drive's
// per-desktop runner sends one synchronised frame at a time, and through
// the guest for text the US keyboard layout cannot type. The results
// (BatchResult) are vocabulary too: the adapters answer with them.
//
// # Canonical actions
//
//	{"action": "screenshot"}
//	{"action": "click", "x": 10, "y": 20, "button": "left", "count": 2, "modifiers": ["ctrl"]}
//	{"action": "move", "x": 10, "y": 20}
//	{"action": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}], "button": "left"}
//	{"action": "mouse_down", "button": "left", "x": 1, "y": 2}   (x, y optional)
//	{"action": "mouse_up", "button": "left"}
//	{"action": "scroll", "x": 640, "y": 400, "dx": 0, "dy": 3}   (wheel notches; +dy down, +dx right)
//	{"action": "type", "text": "naïve café"}
//	{"action": "key", "chord": "ctrl+shift+t", "repeat": 2}
//	{"action": "hold_key", "keys": ["shift"], "duration": 1.5}  (seconds)
//	{"action": "wait", "duration": 2}
//	{"action": "cursor_position"}
//	{"action": "zoom", "region": [0, 0, 640, 400]}
//
// Decoding is strict: an unknown action or field, a missing or wrong-typed
// parameter is a *ValidationError naming the field ("actions[2].x"), and
// errors.Is(err, ErrInvalid) holds for all of them. Validation (values,
// limits, key names, coordinates against the Space) covers the whole batch
// before anything is sent: nothing at all is sent for a batch that fails.
// Coordinates are in the ValidateOptions.Space (a scaled screenshot's, or
// NativeSpace); outside it is an error, never a clamp.
//
// # Keys
//
// ParseChord resolves xdotool/X keysym names ("Return", "KP_0", "alt+Tab",
// "Page_Down", "bracketleft"), OpenAI names ("ENTER", "ESC", "ARROWDOWN",
// "CMD", "/"), QEMU qcode names and single characters, case-insensitively,
// through one table (keytable.go) whose every entry is table-tested against
// QEMU 7.2's QKeyCode enum. An unknown name's error lists the closest valid
// names. F13 to F24 have no qcode before QEMU 8.0 and are rejected with that
// reason.
//
// # Typing
//
// Text whose every rune is on the US layout is planned as key presses with
// shift where needed (TextPlan.Strokes), which drive sends one keystroke
// with its modifiers per frame, paced by its typing rate. Text with any
// other rune goes whole through the guest (TextPlan.Guest): see planText
// for why the string is not split.
//
// # Known limits
//
// Keys sent through QEMU and text sent through the guest travel separate
// paths; a key action followed by non-US text in one batch is ordered only
// by the guest agent's round trip being slower than the keyboard. Drags jump
// between their path points without interpolating.
package input
