package input

import (
	"unicode/utf8"
)

// TextPlan is how one type action's text is delivered.
type TextPlan struct {
	Strokes []Keystroke // key presses, when every rune is on the US layout
	Guest   string      // the whole text, when some rune is not
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
func planText(text string, field string) (TextPlan, error) {
	if !utf8.ValidString(text) {
		return TextPlan{}, Invalid(field, "not valid UTF-8")
	}
	typeable := true
	for i, r := range text {
		if (r < ' ' && r != '\n' && r != '\r' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return TextPlan{}, Invalid(field, "control character %U at byte %d cannot be typed", r, i)
		}
		if _, ok := usKeystroke(r); !ok && r != '\r' {
			typeable = false
		}
	}
	if !typeable {
		return TextPlan{Guest: text}, nil
	}
	var strokes []Keystroke
	for i, r := range text {
		if r == '\r' {
			if i+1 < len(text) && text[i+1] == '\n' {
				continue // "\r\n" is one Return: the "\n" sends it
			}
			r = '\n'
		}
		k, _ := usKeystroke(r)
		if k.shift {
			strokes = append(strokes, Keystroke{"shift", k.qcode})
		} else {
			strokes = append(strokes, Keystroke{k.qcode})
		}
	}
	return TextPlan{Strokes: strokes}, nil
}

// Keystroke is one press of a key with its modifiers: qcodes pressed in
// order and released in reverse.
type Keystroke []string
