package input

import (
	"slices"
	"strings"
	"testing"
)

// qemu72QKeyCodes is QEMU 7.2's QKeyCode enum (qapi/ui.json), without f13 to
// f24, which QEMU 8.0 added.
var qemu72QKeyCodes = strings.Fields(`
	unmapped shift shift_r alt alt_r ctrl ctrl_r menu esc 1 2 3 4 5 6 7 8 9 0
	minus equal backspace tab q w e r t y u i o p bracket_left bracket_right
	ret a s d f g h j k l semicolon apostrophe grave_accent backslash z x c v b
	n m comma dot slash asterisk spc caps_lock f1 f2 f3 f4 f5 f6 f7 f8 f9 f10
	num_lock scroll_lock kp_divide kp_multiply kp_subtract kp_add kp_enter
	kp_decimal sysrq kp_0 kp_1 kp_2 kp_3 kp_4 kp_5 kp_6 kp_7 kp_8 kp_9 less
	f11 f12 print home pgup pgdn end left up down right insert delete stop
	again props undo front copy open paste find cut lf help meta_l meta_r
	compose pause ro hiragana henkan yen muhenkan katakanahiragana kp_comma
	kp_equals power sleep wake audionext audioprev audiostop audioplay
	audiomute volumeup volumedown mediaselect mail calculator computer
	ac_home ac_back ac_forward ac_refresh ac_bookmarks lang1 lang2`)

type wantKey struct {
	qcode string
	shift bool
}

// wantNamedKeys is the expected value of every entry of namedKeys, written
// out independently. TestKeyTableEveryEntry fails if an entry is missing
// here or differs.
var wantNamedKeys = map[string]wantKey{
	"ctrl": {"ctrl", false}, "control": {"ctrl", false}, "ctrl_l": {"ctrl", false},
	"control_l": {"ctrl", false}, "ctrl_r": {"ctrl_r", false}, "control_r": {"ctrl_r", false},
	"shift": {"shift", false}, "shift_l": {"shift", false}, "shift_r": {"shift_r", false},
	"alt": {"alt", false}, "alt_l": {"alt", false}, "alt_r": {"alt_r", false},
	"option": {"alt", false}, "altgr": {"alt_r", false}, "ISO_Level3_Shift": {"alt_r", false},
	"super": {"meta_l", false}, "super_l": {"meta_l", false}, "super_r": {"meta_r", false},
	"meta": {"meta_l", false}, "meta_l": {"meta_l", false}, "meta_r": {"meta_r", false},
	"cmd": {"meta_l", false}, "command": {"meta_l", false}, "win": {"meta_l", false},
	"windows": {"meta_l", false},

	"Return": {"ret", false}, "Enter": {"ret", false}, "ret": {"ret", false},
	"Escape": {"esc", false}, "Esc": {"esc", false},
	"Tab": {"tab", false}, "ISO_Left_Tab": {"tab", true},
	"BackSpace": {"backspace", false}, "Delete": {"delete", false}, "Del": {"delete", false},
	"Insert": {"insert", false}, "Home": {"home", false}, "End": {"end", false},
	"Prior": {"pgup", false}, "Page_Up": {"pgup", false}, "PageUp": {"pgup", false}, "pgup": {"pgup", false},
	"Next": {"pgdn", false}, "Page_Down": {"pgdn", false}, "PageDown": {"pgdn", false}, "pgdn": {"pgdn", false},
	"Left": {"left", false}, "Right": {"right", false}, "Up": {"up", false}, "Down": {"down", false},
	"ArrowLeft": {"left", false}, "ArrowRight": {"right", false}, "ArrowUp": {"up", false}, "ArrowDown": {"down", false},
	"space": {"spc", false}, "spc": {"spc", false},
	"Menu": {"compose", false}, "compose": {"compose", false}, "Multi_key": {"compose", false},
	"ContextMenu": {"compose", false}, "PrintScreen": {"print", false},
	"Print": {"print", false}, "Sys_Req": {"print", false}, "Pause": {"pause", false}, "Break": {"pause", false},
	"Caps_Lock": {"caps_lock", false}, "CapsLock": {"caps_lock", false},
	"Num_Lock": {"num_lock", false}, "NumLock": {"num_lock", false},
	"Scroll_Lock": {"scroll_lock", false}, "ScrollLock": {"scroll_lock", false},

	"F1": {"f1", false}, "F2": {"f2", false}, "F3": {"f3", false}, "F4": {"f4", false},
	"F5": {"f5", false}, "F6": {"f6", false}, "F7": {"f7", false}, "F8": {"f8", false},
	"F9": {"f9", false}, "F10": {"f10", false}, "F11": {"f11", false}, "F12": {"f12", false},

	"KP_0": {"kp_0", false}, "KP_1": {"kp_1", false}, "KP_2": {"kp_2", false}, "KP_3": {"kp_3", false},
	"KP_4": {"kp_4", false}, "KP_5": {"kp_5", false}, "KP_6": {"kp_6", false}, "KP_7": {"kp_7", false},
	"KP_8": {"kp_8", false}, "KP_9": {"kp_9", false},
	"KP_Add": {"kp_add", false}, "KP_Subtract": {"kp_subtract", false}, "KP_Multiply": {"kp_multiply", false},
	"KP_Divide": {"kp_divide", false}, "KP_Decimal": {"kp_decimal", false}, "KP_Enter": {"kp_enter", false},
	"KP_Equal": {"kp_equals", false}, "KP_Separator": {"kp_comma", false},
	"KP_Insert": {"kp_0", false}, "KP_End": {"kp_1", false}, "KP_Down": {"kp_2", false},
	"KP_Next": {"kp_3", false}, "KP_Page_Down": {"kp_3", false}, "KP_Left": {"kp_4", false},
	"KP_Begin": {"kp_5", false}, "KP_Right": {"kp_6", false}, "KP_Home": {"kp_7", false},
	"KP_Up": {"kp_8", false}, "KP_Prior": {"kp_9", false}, "KP_Page_Up": {"kp_9", false},
	"KP_Delete": {"kp_decimal", false},

	"minus": {"minus", false}, "equal": {"equal", false},
	"bracketleft": {"bracket_left", false}, "bracketright": {"bracket_right", false},
	"bracket_left": {"bracket_left", false}, "bracket_right": {"bracket_right", false},
	"backslash": {"backslash", false}, "semicolon": {"semicolon", false},
	"apostrophe": {"apostrophe", false}, "quoteright": {"apostrophe", false},
	"grave": {"grave_accent", false}, "grave_accent": {"grave_accent", false}, "quoteleft": {"grave_accent", false},
	"comma": {"comma", false}, "period": {"dot", false}, "dot": {"dot", false}, "slash": {"slash", false},
	"exclam": {"1", true}, "at": {"2", true}, "numbersign": {"3", true}, "dollar": {"4", true},
	"percent": {"5", true}, "asciicircum": {"6", true}, "ampersand": {"7", true}, "asterisk": {"8", true},
	"parenleft": {"9", true}, "parenright": {"0", true}, "underscore": {"minus", true}, "plus": {"equal", true},
	"braceleft": {"bracket_left", true}, "braceright": {"bracket_right", true}, "bar": {"backslash", true},
	"colon": {"semicolon", true}, "quotedbl": {"apostrophe", true}, "asciitilde": {"grave_accent", true},
	"less": {"comma", true}, "greater": {"dot", true}, "question": {"slash", true},
	"iso_102nd": {"less", false},

	"XF86AudioMute": {"audiomute", false}, "XF86AudioRaiseVolume": {"volumeup", false},
	"XF86AudioLowerVolume": {"volumedown", false}, "XF86AudioPlay": {"audioplay", false},
	"XF86AudioStop": {"audiostop", false}, "XF86AudioNext": {"audionext", false},
	"XF86AudioPrev": {"audioprev", false}, "XF86AudioMedia": {"mediaselect", false},
	"XF86Mail": {"mail", false}, "XF86Calculator": {"calculator", false}, "XF86MyComputer": {"computer", false},
	"XF86HomePage": {"ac_home", false}, "XF86Back": {"ac_back", false}, "XF86Forward": {"ac_forward", false},
	"XF86Reload": {"ac_refresh", false}, "XF86Refresh": {"ac_refresh", false},
	"XF86Favorites": {"ac_bookmarks", false}, "XF86PowerOff": {"power", false},
	"XF86Sleep": {"sleep", false}, "XF86WakeUp": {"wake", false},
	"XF86Copy": {"copy", false}, "XF86Cut": {"cut", false}, "XF86Paste": {"paste", false}, "XF86Open": {"open", false},
	"Help": {"help", false}, "Undo": {"undo", false}, "Redo": {"again", false}, "Find": {"find", false},
	"Cancel": {"stop", false}, "Henkan": {"henkan", false}, "Muhenkan": {"muhenkan", false},
	"Hiragana": {"hiragana", false}, "Hiragana_Katakana": {"katakanahiragana", false},
}

func TestKeyTableEveryEntry(t *testing.T) {
	seen := map[string]string{}
	for _, e := range namedKeys() {
		folded := strings.ToLower(e.name)
		if prev, dup := seen[folded]; dup {
			t.Errorf("%q and %q are the same name case-insensitively", prev, e.name)
		}
		seen[folded] = e.name
		want, ok := wantNamedKeys[e.name]
		if !ok {
			t.Errorf("table entry %q (%s) has no expected value in wantNamedKeys", e.name, e.qcode)
			continue
		}
		if e.qcode != want.qcode || e.shift != want.shift {
			t.Errorf("%q = %s shift=%v, want %s shift=%v", e.name, e.qcode, e.shift, want.qcode, want.shift)
		}
		// Every entry must resolve through the public parser, in any case.
		for _, spelling := range []string{e.name, strings.ToUpper(e.name), strings.ToLower(e.name)} {
			chord, err := ParseChord(spelling)
			if err != nil {
				t.Errorf("ParseChord(%q): %v", spelling, err)
				continue
			}
			wantChord := Chord{want.qcode}
			if want.shift {
				wantChord = Chord{"shift", want.qcode}
			}
			if !slices.Equal(chord, wantChord) {
				t.Errorf("ParseChord(%q) = %v, want %v", spelling, chord, wantChord)
			}
		}
	}
	for name := range wantNamedKeys {
		if _, ok := seen[strings.ToLower(name)]; !ok {
			t.Errorf("expected key %q is missing from the table", name)
		}
	}
}

func TestEveryKeyMapsToAQEMU72Qcode(t *testing.T) {
	for name, e := range keyIndex() {
		if !slices.Contains(qemu72QKeyCodes, e.qcode) {
			t.Errorf("key %q maps to %q, which is not a QEMU 7.2 qcode", name, e.qcode)
		}
	}
	for _, k := range usLayoutKeys() {
		if !slices.Contains(qemu72QKeyCodes, k.qcode) {
			t.Errorf("layout %q maps to %q, which is not a QEMU 7.2 qcode", k.r, k.qcode)
		}
	}
}

// TestUSLayoutEveryEntry checks the layout against the US keyboard written
// out row by row: each character of unshifted and shifted sits on the qcode
// at the same position.
func TestUSLayoutEveryEntry(t *testing.T) {
	qcodes := strings.Fields("grave_accent 1 2 3 4 5 6 7 8 9 0 minus equal bracket_left bracket_right backslash semicolon apostrophe comma dot slash")
	const unshifted = "`1234567890-=[]\\;',./"
	const shifted = "~!@#$%^&*()_+{}|:\"<>?"
	want := map[rune]usKey{'\n': {'\n', "ret", false}, '\t': {'\t', "tab", false}, ' ': {' ', "spc", false}}
	for i, q := range qcodes {
		want[rune(unshifted[i])] = usKey{rune(unshifted[i]), q, false}
		want[rune(shifted[i])] = usKey{rune(shifted[i]), q, true}
	}
	for c := 'a'; c <= 'z'; c++ {
		want[c] = usKey{c, string(c), false}
		want[c-'a'+'A'] = usKey{c - 'a' + 'A', string(c), true}
	}
	got := usLayoutKeys()
	if len(got) != len(want) {
		t.Errorf("layout has %d entries, want %d", len(got), len(want))
	}
	for _, k := range got {
		if w, ok := want[k.r]; !ok || w != k {
			t.Errorf("layout %q = %+v, want %+v", k.r, k, w)
		}
	}
	for r := rune(' '); r <= '~'; r++ {
		if _, ok := usKeystroke(r); !ok {
			t.Errorf("printable ASCII %q is not typeable", r)
		}
	}
	for _, r := range "éü日🙂\u00a0€£" {
		if _, ok := usKeystroke(r); ok {
			t.Errorf("%q should not be on the US layout", r)
		}
	}
}
