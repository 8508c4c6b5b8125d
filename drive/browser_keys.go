package drive

import (
	"fmt"
	"strings"
	"unicode"
)

// cdpKey is one key as DevTools' Input.dispatchKeyEvent names it.
type cdpKey struct {
	key, code string
	vk        int    // Windows virtual key code, which pages read as keyCode
	text      string // what a press types, if anything
}

// CDP modifier bits.
const (
	modAlt   = 1
	modCtrl  = 2
	modMeta  = 4
	modShift = 8
)

var namedKeys = map[string]cdpKey{
	"enter":      {"Enter", "Enter", 13, "\r"},
	"tab":        {"Tab", "Tab", 9, ""},
	"escape":     {"Escape", "Escape", 27, ""},
	"backspace":  {"Backspace", "Backspace", 8, ""},
	"delete":     {"Delete", "Delete", 46, ""},
	"insert":     {"Insert", "Insert", 45, ""},
	"space":      {" ", "Space", 32, " "},
	"arrowup":    {"ArrowUp", "ArrowUp", 38, ""},
	"arrowdown":  {"ArrowDown", "ArrowDown", 40, ""},
	"arrowleft":  {"ArrowLeft", "ArrowLeft", 37, ""},
	"arrowright": {"ArrowRight", "ArrowRight", 39, ""},
	"home":       {"Home", "Home", 36, ""},
	"end":        {"End", "End", 35, ""},
	"pageup":     {"PageUp", "PageUp", 33, ""},
	"pagedown":   {"PageDown", "PageDown", 34, ""},
	"shift":      {"Shift", "ShiftLeft", 16, ""},
	"control":    {"Control", "ControlLeft", 17, ""},
	"alt":        {"Alt", "AltLeft", 18, ""},
	"meta":       {"Meta", "MetaLeft", 91, ""},
}

// keyAliases are the other names agents use (X keysyms among them).
var keyAliases = map[string]string{
	"return": "enter", "kp_enter": "enter", "esc": "escape", "back_space": "backspace",
	"del": "delete", "up": "arrowup", "down": "arrowdown", "left": "arrowleft", "right": "arrowright",
	"prior": "pageup", "next": "pagedown", "page_up": "pageup", "page_down": "pagedown",
	"ctrl": "control", "ctrl_l": "control", "control_l": "control", "shift_l": "shift",
	"alt_l": "alt", "option": "alt", "cmd": "meta", "command": "meta", "super": "meta",
	"super_l": "meta", "win": "meta", "meta_l": "meta",
}

// modifierBit is a modifier key's bit, or 0.
func modifierBit(k cdpKey) int {
	switch k.key {
	case "Alt":
		return modAlt
	case "Control":
		return modCtrl
	case "Meta":
		return modMeta
	case "Shift":
		return modShift
	}
	return 0
}

// lookupKey finds one key by name: a named key, F1 to F24, or one
// printable character.
func lookupKey(name string) (cdpKey, error) {
	lower := strings.ToLower(name)
	if a, ok := keyAliases[lower]; ok {
		lower = a
	}
	if k, ok := namedKeys[lower]; ok {
		return k, nil
	}
	var f int
	if _, err := fmt.Sscanf(lower, "f%d", &f); err == nil && f >= 1 && f <= 24 && lower == fmt.Sprintf("f%d", f) {
		return cdpKey{key: fmt.Sprintf("F%d", f), code: fmt.Sprintf("F%d", f), vk: 111 + f}, nil
	}
	r := []rune(name)
	if len(r) == 1 && unicode.IsPrint(r[0]) {
		c := r[0]
		k := cdpKey{key: string(c), text: string(c)}
		switch {
		case c >= 'a' && c <= 'z':
			k.code, k.vk = "Key"+string(unicode.ToUpper(c)), int(unicode.ToUpper(c))
		case c >= 'A' && c <= 'Z':
			k.code, k.vk = "Key"+string(c), int(c)
		case c >= '0' && c <= '9':
			k.code, k.vk = "Digit"+string(c), int(c)
		}
		return k, nil
	}
	return cdpKey{}, fmt.Errorf("key %q is not one the browser executor sends: use a character, F1 to F24, or one of Enter, Tab, Escape, Backspace, Delete, Insert, Space, ArrowUp, ArrowDown, ArrowLeft, ArrowRight, Home, End, PageUp, PageDown, shift, ctrl, alt, cmd", name)
}

// parseKeyChord reads "ctrl+shift+p": the modifiers and the last key.
func parseKeyChord(chord string) (mods []cdpKey, key cdpKey, err error) {
	parts := strings.Split(chord, "+")
	if chord == "+" {
		parts = []string{"+"}
	}
	for i, p := range parts {
		k, err := lookupKey(p)
		if err != nil {
			return nil, cdpKey{}, err
		}
		if i < len(parts)-1 {
			if modifierBit(k) == 0 {
				return nil, cdpKey{}, fmt.Errorf("%q in %q is not a modifier: only the last key of a chord may be another key", p, chord)
			}
			mods = append(mods, k)
			continue
		}
		key = k
	}
	return mods, key, nil
}
