package input

import "sync"

// usKey is how the US layout types one character: a qcode, with or without
// shift.
type usKey struct {
	r     rune
	qcode string
	shift bool
}

// usLayoutKeys lists every character the US (QWERTY, pc105 "us") layout
// types with one key, unshifted or shifted. Anything else (accents, CJK,
// emoji) must go through the guest.
func usLayoutKeys() []usKey {
	keys := []usKey{
		{'\n', "ret", false},
		{'\t', "tab", false},
		{' ', "spc", false},
		{'`', "grave_accent", false}, {'~', "grave_accent", true},
		{'1', "1", false}, {'!', "1", true},
		{'2', "2", false}, {'@', "2", true},
		{'3', "3", false}, {'#', "3", true},
		{'4', "4", false}, {'$', "4", true},
		{'5', "5", false}, {'%', "5", true},
		{'6', "6", false}, {'^', "6", true},
		{'7', "7", false}, {'&', "7", true},
		{'8', "8", false}, {'*', "8", true},
		{'9', "9", false}, {'(', "9", true},
		{'0', "0", false}, {')', "0", true},
		{'-', "minus", false}, {'_', "minus", true},
		{'=', "equal", false}, {'+', "equal", true},
		{'[', "bracket_left", false}, {'{', "bracket_left", true},
		{']', "bracket_right", false}, {'}', "bracket_right", true},
		{'\\', "backslash", false}, {'|', "backslash", true},
		{';', "semicolon", false}, {':', "semicolon", true},
		{'\'', "apostrophe", false}, {'"', "apostrophe", true},
		{',', "comma", false}, {'<', "comma", true},
		{'.', "dot", false}, {'>', "dot", true},
		{'/', "slash", false}, {'?', "slash", true},
	}
	for c := 'a'; c <= 'z'; c++ {
		keys = append(keys, usKey{c, string(c), false}, usKey{c - 'a' + 'A', string(c), true})
	}
	return keys
}

// usLayout indexes usLayoutKeys by character. Built once, never modified.
var usLayout = sync.OnceValue(func() map[rune]usKey {
	m := map[rune]usKey{}
	for _, k := range usLayoutKeys() {
		m[k.r] = k
	}
	return m
})

// usKeystroke returns how the US layout types r.
func usKeystroke(r rune) (usKey, bool) {
	k, ok := usLayout()[r]
	return k, ok
}
