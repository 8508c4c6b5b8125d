package input

import (
	"context"
	"unicode/utf8"
)

// Guest delivers text that the US keyboard layout cannot type (accents, CJK,
// emoji) from inside the guest, for example by pasting through the clipboard
// or with `xdotool type`; the guest agent implements it.
type Guest interface {
	// TypeText makes text appear at the focused widget exactly as given.
	TypeText(ctx context.Context, text string) error
}

// textPlan is how one type action's text is delivered.
type textPlan struct {
	strokes []keystroke // key presses, when every rune is on the US layout
	guest   string      // the whole text, when some rune is not
}

// planText decides how text is delivered. If every rune is on the US layout
// the text becomes key presses (newline as Return, tab as Tab, "\r\n" as one
// Return). Otherwise the whole string goes through the guest in one call,
// not just the runes the layout lacks: key presses travel through QEMU's
// keyboard and the guest's text through its agent, two paths with no
// ordering between them, so splitting "naïve" into keys and guest text could
// land as "nave" + "ï" in the wrong order; one guest call also costs one
// agent round trip (0.1 to 0.7 s under TCG) instead of one per run.
//
// Control characters other than newline, carriage return and tab are
// rejected: neither path can type them.
func planText(text string, field string) (textPlan, error) {
	if !utf8.ValidString(text) {
		return textPlan{}, invalid(field, "not valid UTF-8")
	}
	typeable := true
	for i, r := range text {
		if (r < ' ' && r != '\n' && r != '\r' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return textPlan{}, invalid(field, "control character %U at byte %d cannot be typed", r, i)
		}
		if _, ok := usKeystroke(r); !ok && r != '\r' {
			typeable = false
		}
	}
	if !typeable {
		return textPlan{guest: text}, nil
	}
	var strokes []keystroke
	for i, r := range text {
		if r == '\r' {
			if i+1 < len(text) && text[i+1] == '\n' {
				continue // "\r\n" is one Return: the "\n" sends it
			}
			r = '\n'
		}
		k, _ := usKeystroke(r)
		if k.shift {
			strokes = append(strokes, keystroke{"shift", k.qcode})
		} else {
			strokes = append(strokes, keystroke{k.qcode})
		}
	}
	return textPlan{strokes: strokes}, nil
}

// keystroke is one press of a key with its modifiers: qcodes pressed in
// order and released in reverse.
type keystroke []string

// ps2Bytes estimates the PS/2 scancode set 2 bytes of pressing and releasing
// a qcode: 1 + 2 for most keys, 2 + 3 for the E0-prefixed ones, more for
// Print and Pause.
func ps2Bytes(qcode string) int {
	switch qcode {
	case "print":
		return 10
	case "pause":
		return 8
	case "ctrl_r", "alt_r", "meta_l", "meta_r", "compose", "menu", "insert", "delete",
		"home", "end", "pgup", "pgdn", "left", "right", "up", "down", "kp_divide", "kp_enter",
		"power", "sleep", "wake", "audionext", "audioprev", "audiostop", "audioplay",
		"audiomute", "volumeup", "volumedown", "mediaselect", "mail", "calculator",
		"computer", "ac_home", "ac_back", "ac_forward", "ac_refresh", "ac_bookmarks":
		return 5
	}
	return 3
}

// ps2QueueBytes is the size of QEMU's PS/2 keyboard queue. A frame that
// would overflow it loses keys, so fitsOneFrame splits such keystrokes.
const ps2QueueBytes = 16

// fitsOneFrame reports whether the press and release of the whole keystroke
// fit in the PS/2 queue at once.
func (k keystroke) fitsOneFrame() bool {
	n := 0
	for _, q := range k {
		n += ps2Bytes(q)
	}
	return n <= ps2QueueBytes
}
