package input

import (
	"strings"
	"sync"
)

// keyEntry maps one key name to a QEMU 7.2 qcode (qapi/ui.json QKeyCode).
// shift is set for names of symbols that the US layout types with shift,
// such as "exclam" (!) or "ISO_Left_Tab".
type keyEntry struct {
	name  string
	qcode string
	shift bool
}

// namedKeys is THE key table: X keysym names (what xdotool and Anthropic's
// computer tool send), OpenAI's key names, and the QEMU qcode names
// themselves. Lookup is case-insensitive, so "Return", "RETURN" and "return"
// are one entry. Single characters are not listed here: they resolve through
// the US layout (layout.go), the same table typing uses, so "a", "A", "/"
// and "!" mean the key that types them (letters never imply shift, so
// OpenAI's ["CTRL","L"] is ctrl+l).
//
// Where a keysym and a qcode share a name, the keysym wins: "less" is
// shift+comma as on a US keyboard (the ISO 102nd key is "iso_102nd"),
// "asterisk" is shift+8 (the keypad's is "KP_Multiply"), and "Menu" is the
// PC application key, which QEMU calls compose.
func namedKeys() []keyEntry {
	return []keyEntry{
		// Modifiers. Meta, Cmd, Win and Super are all the logo key, the one
		// Linux desktops bind; QEMU names it meta_l.
		{"ctrl", "ctrl", false},
		{"control", "ctrl", false},
		{"ctrl_l", "ctrl", false},
		{"control_l", "ctrl", false},
		{"ctrl_r", "ctrl_r", false},
		{"control_r", "ctrl_r", false},
		{"shift", "shift", false},
		{"shift_l", "shift", false},
		{"shift_r", "shift_r", false},
		{"alt", "alt", false},
		{"alt_l", "alt", false},
		{"alt_r", "alt_r", false},
		{"option", "alt", false},
		{"altgr", "alt_r", false},
		{"ISO_Level3_Shift", "alt_r", false},
		{"super", "meta_l", false},
		{"super_l", "meta_l", false},
		{"super_r", "meta_r", false},
		{"meta", "meta_l", false},
		{"meta_l", "meta_l", false},
		{"meta_r", "meta_r", false},
		{"cmd", "meta_l", false},
		{"command", "meta_l", false},
		{"win", "meta_l", false},
		{"windows", "meta_l", false},

		// Editing and navigation.
		{"Return", "ret", false},
		{"Enter", "ret", false},
		{"ret", "ret", false},
		{"Escape", "esc", false},
		{"Esc", "esc", false},
		{"Tab", "tab", false},
		{"ISO_Left_Tab", "tab", true},
		{"BackSpace", "backspace", false},
		{"Delete", "delete", false},
		{"Del", "delete", false},
		{"Insert", "insert", false},
		{"Home", "home", false},
		{"End", "end", false},
		{"Prior", "pgup", false},
		{"Page_Up", "pgup", false},
		{"PageUp", "pgup", false},
		{"pgup", "pgup", false},
		{"Next", "pgdn", false},
		{"Page_Down", "pgdn", false},
		{"PageDown", "pgdn", false},
		{"pgdn", "pgdn", false},
		{"Left", "left", false},
		{"Right", "right", false},
		{"Up", "up", false},
		{"Down", "down", false},
		{"ArrowLeft", "left", false},
		{"ArrowRight", "right", false},
		{"ArrowUp", "up", false},
		{"ArrowDown", "down", false},
		{"space", "spc", false},
		{"spc", "spc", false},
		{"Menu", "compose", false},
		{"compose", "compose", false},
		{"Multi_key", "compose", false},
		{"ContextMenu", "compose", false},
		{"Print", "print", false},
		{"PrintScreen", "print", false},
		{"Sys_Req", "print", false},
		{"Pause", "pause", false},
		{"Break", "pause", false},
		{"Caps_Lock", "caps_lock", false},
		{"CapsLock", "caps_lock", false},
		{"Num_Lock", "num_lock", false},
		{"NumLock", "num_lock", false},
		{"Scroll_Lock", "scroll_lock", false},
		{"ScrollLock", "scroll_lock", false},

		// Function keys. QEMU 7.2 has f1 to f12 only; f13 to f24 arrived
		// in QEMU 8.0, so lookupKey explains those instead of mapping them.
		{"F1", "f1", false},
		{"F2", "f2", false},
		{"F3", "f3", false},
		{"F4", "f4", false},
		{"F5", "f5", false},
		{"F6", "f6", false},
		{"F7", "f7", false},
		{"F8", "f8", false},
		{"F9", "f9", false},
		{"F10", "f10", false},
		{"F11", "f11", false},
		{"F12", "f12", false},

		// Keypad. The navigation keysyms are the keypad keys with Num Lock off.
		{"KP_0", "kp_0", false},
		{"KP_1", "kp_1", false},
		{"KP_2", "kp_2", false},
		{"KP_3", "kp_3", false},
		{"KP_4", "kp_4", false},
		{"KP_5", "kp_5", false},
		{"KP_6", "kp_6", false},
		{"KP_7", "kp_7", false},
		{"KP_8", "kp_8", false},
		{"KP_9", "kp_9", false},
		{"KP_Add", "kp_add", false},
		{"KP_Subtract", "kp_subtract", false},
		{"KP_Multiply", "kp_multiply", false},
		{"KP_Divide", "kp_divide", false},
		{"KP_Decimal", "kp_decimal", false},
		{"KP_Enter", "kp_enter", false},
		{"KP_Equal", "kp_equals", false},
		{"KP_Separator", "kp_comma", false},
		{"KP_Insert", "kp_0", false},
		{"KP_End", "kp_1", false},
		{"KP_Down", "kp_2", false},
		{"KP_Next", "kp_3", false},
		{"KP_Page_Down", "kp_3", false},
		{"KP_Left", "kp_4", false},
		{"KP_Begin", "kp_5", false},
		{"KP_Right", "kp_6", false},
		{"KP_Home", "kp_7", false},
		{"KP_Up", "kp_8", false},
		{"KP_Prior", "kp_9", false},
		{"KP_Page_Up", "kp_9", false},
		{"KP_Delete", "kp_decimal", false},

		// Punctuation keysyms, unshifted then shifted on the US layout.
		{"minus", "minus", false},
		{"equal", "equal", false},
		{"bracketleft", "bracket_left", false},
		{"bracketright", "bracket_right", false},
		{"bracket_left", "bracket_left", false},
		{"bracket_right", "bracket_right", false},
		{"backslash", "backslash", false},
		{"semicolon", "semicolon", false},
		{"apostrophe", "apostrophe", false},
		{"quoteright", "apostrophe", false},
		{"grave", "grave_accent", false},
		{"grave_accent", "grave_accent", false},
		{"quoteleft", "grave_accent", false},
		{"comma", "comma", false},
		{"period", "dot", false},
		{"dot", "dot", false},
		{"slash", "slash", false},
		{"exclam", "1", true},
		{"at", "2", true},
		{"numbersign", "3", true},
		{"dollar", "4", true},
		{"percent", "5", true},
		{"asciicircum", "6", true},
		{"ampersand", "7", true},
		{"asterisk", "8", true},
		{"parenleft", "9", true},
		{"parenright", "0", true},
		{"underscore", "minus", true},
		{"plus", "equal", true},
		{"braceleft", "bracket_left", true},
		{"braceright", "bracket_right", true},
		{"bar", "backslash", true},
		{"colon", "semicolon", true},
		{"quotedbl", "apostrophe", true},
		{"asciitilde", "grave_accent", true},
		{"less", "comma", true},
		{"greater", "dot", true},
		{"question", "slash", true},
		{"iso_102nd", "less", false},

		// Multimedia and other keys QEMU names.
		{"XF86AudioMute", "audiomute", false},
		{"XF86AudioRaiseVolume", "volumeup", false},
		{"XF86AudioLowerVolume", "volumedown", false},
		{"XF86AudioPlay", "audioplay", false},
		{"XF86AudioStop", "audiostop", false},
		{"XF86AudioNext", "audionext", false},
		{"XF86AudioPrev", "audioprev", false},
		{"XF86AudioMedia", "mediaselect", false},
		{"XF86Mail", "mail", false},
		{"XF86Calculator", "calculator", false},
		{"XF86MyComputer", "computer", false},
		{"XF86HomePage", "ac_home", false},
		{"XF86Back", "ac_back", false},
		{"XF86Forward", "ac_forward", false},
		{"XF86Reload", "ac_refresh", false},
		{"XF86Refresh", "ac_refresh", false},
		{"XF86Favorites", "ac_bookmarks", false},
		{"XF86PowerOff", "power", false},
		{"XF86Sleep", "sleep", false},
		{"XF86WakeUp", "wake", false},
		{"XF86Copy", "copy", false},
		{"XF86Cut", "cut", false},
		{"XF86Paste", "paste", false},
		{"XF86Open", "open", false},
		{"Help", "help", false},
		{"Undo", "undo", false},
		{"Redo", "again", false},
		{"Find", "find", false},
		{"Cancel", "stop", false},
		{"Henkan", "henkan", false},
		{"Muhenkan", "muhenkan", false},
		{"Hiragana", "hiragana", false},
		{"Hiragana_Katakana", "katakanahiragana", false},
	}
}

// keyIndex is the case-folded lookup over namedKeys plus every single
// character the US layout types. Built once and never modified.
var keyIndex = sync.OnceValue(func() map[string]keyEntry {
	idx := map[string]keyEntry{}
	for _, e := range namedKeys() {
		idx[strings.ToLower(e.name)] = e
	}
	for _, k := range usLayoutKeys() {
		if k.r < ' ' {
			continue // newline and tab are typed, not named
		}
		name := string(k.r)
		if _, ok := idx[strings.ToLower(name)]; ok {
			continue // "A" folds onto "a": letters never imply shift
		}
		idx[strings.ToLower(name)] = keyEntry{name: name, qcode: k.qcode, shift: k.shift}
	}
	return idx
})

// keyNames returns every name lookupKey accepts, for suggestions.
var keyNames = sync.OnceValue(func() []string {
	idx := keyIndex()
	names := make([]string, 0, len(idx))
	for _, e := range idx {
		names = append(names, e.name)
	}
	return names
})
