package input

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// chordCases are xdotool/keysym style and OpenAI style chords with the
// qcodes they press. The fuzz target FuzzParseChord is seeded from them.
var chordCases = []struct {
	chord string
	want  Chord
}{
	{"ctrl+shift+t", Chord{"ctrl", "shift", "t"}},
	{"Return", Chord{"ret"}},
	{"KP_0", Chord{"kp_0"}},
	{"alt+Tab", Chord{"alt", "tab"}},
	{"super", Chord{"meta_l"}},
	{"Page_Down", Chord{"pgdn"}},
	{"BackSpace", Chord{"backspace"}},
	{"F1", Chord{"f1"}},
	{"F12", Chord{"f12"}},
	{"Escape", Chord{"esc"}},
	{"Left", Chord{"left"}},
	{"Home", Chord{"home"}},
	{"Delete", Chord{"delete"}},
	{"Insert", Chord{"insert"}},
	{"Prior", Chord{"pgup"}},
	{"Next", Chord{"pgdn"}},
	{"space", Chord{"spc"}},
	{"minus", Chord{"minus"}},
	{"slash", Chord{"slash"}},
	{"backslash", Chord{"backslash"}},
	{"bracketleft", Chord{"bracket_left"}},
	{"KP_Enter", Chord{"kp_enter"}},
	{"ctrl+s", Chord{"ctrl", "s"}},
	{"Up", Chord{"up"}},
	{"a", Chord{"a"}},
	{"A", Chord{"a"}}, // case-insensitive: a letter never implies shift
	{"shift+a", Chord{"shift", "a"}},
	{"5", Chord{"5"}},
	{"!", Chord{"shift", "1"}},
	{"ctrl+!", Chord{"ctrl", "shift", "1"}},
	{"shift+exclam", Chord{"shift", "1"}},
	{"shift_r+ISO_Left_Tab", Chord{"shift_r", "tab"}},
	{"+", Chord{"shift", "equal"}},
	{"ctrl++", Chord{"ctrl", "shift", "equal"}},
	{"ctrl+-", Chord{"ctrl", "minus"}},
	{" ", Chord{"spc"}},
	{"ctrl + t", Chord{"ctrl", "t"}},
	{"ctrl+ctrl+a", Chord{"ctrl", "a"}},
	{"less", Chord{"shift", "comma"}},
	{"Menu", Chord{"compose"}},
	{"ctrl+alt+Delete", Chord{"ctrl", "alt", "delete"}},
	{"KP_Home", Chord{"kp_7"}},
	// OpenAI's names, as the model writes them.
	{"CTRL+L", Chord{"ctrl", "l"}},
	{"ENTER", Chord{"ret"}},
	{"ESC", Chord{"esc"}},
	{"ARROWDOWN", Chord{"down"}},
	{"CMD", Chord{"meta_l"}},
	{"WIN", Chord{"meta_l"}},
	{"META", Chord{"meta_l"}},
	{"OPTION", Chord{"alt"}},
	{"PAGEDOWN", Chord{"pgdn"}},
	{"SPACE", Chord{"spc"}},
	{"/", Chord{"slash"}},
	{"\\", Chord{"backslash"}},
	{"CAPSLOCK", Chord{"caps_lock"}},
	{"CTRL+SHIFT+TAB", Chord{"ctrl", "shift", "tab"}},
}

func TestParseChord(t *testing.T) {
	for _, c := range chordCases {
		got, err := ParseChord(c.chord)
		if err != nil {
			t.Errorf("ParseChord(%q): %v", c.chord, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ParseChord(%q) = %v, want %v", c.chord, got, c.want)
		}
	}
}

func TestParseChordErrors(t *testing.T) {
	for _, c := range []struct {
		chord   string
		contain []string
	}{
		{"", []string{"no key"}},
		{"ctrl+", []string{"ends with"}},
		{"Entr", []string{`unknown key "Entr"`, "Enter"}},
		{"ctrl+Retrun", []string{`unknown key "Retrun"`, "Return"}},
		{"Page_Dwn", []string{"Page_Down"}},
		{"F13", []string{"QEMU 8.0"}},
		{"F24", []string{"QEMU 8.0"}},
		{"é", []string{`unknown key "é"`}},
	} {
		_, err := ParseChord(c.chord)
		if err == nil {
			t.Errorf("ParseChord(%q) succeeded", c.chord)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseChord(%q): %v is not ErrInvalid", c.chord, err)
		}
		for _, s := range c.contain {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseChord(%q) = %q, want it to contain %q", c.chord, err, s)
			}
		}
	}
}

func TestUnknownKeyListsClosestNames(t *testing.T) {
	_, err := ParseChord("ctrl+Escpe")
	var uk *UnknownKeyError
	if !errors.As(err, &uk) {
		t.Fatalf("err = %v, want *UnknownKeyError", err)
	}
	if uk.Name != "Escpe" || len(uk.Suggestions) != 3 || uk.Suggestions[0] != "Escape" {
		t.Errorf("got %+v, want Escape first of three suggestions", uk)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "[1]" {
		t.Errorf("field = %v, want [1] (the second name)", err)
	}
}

func TestParseKeys(t *testing.T) {
	got, err := ParseKeys([]string{"CTRL", "SHIFT", "T"})
	if err != nil || !slices.Equal(got, Chord{"ctrl", "shift", "t"}) {
		t.Errorf("ParseKeys = %v, %v", got, err)
	}
	if _, err := ParseKeys(nil); err == nil {
		t.Error("ParseKeys(nil) succeeded")
	}
}

func TestUnknownKeyErrorIsInvalidOnItsOwn(t *testing.T) {
	err := &UnknownKeyError{Name: "x", Suggestions: []string{"a", "b"}}
	if !errors.Is(err, ErrInvalid) {
		t.Error("UnknownKeyError is not ErrInvalid")
	}
	if got := err.Error(); got != `unknown key "x"; closest valid names: a, b` {
		t.Errorf("Error() = %q", got)
	}
}
