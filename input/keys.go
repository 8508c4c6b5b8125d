package input

import (
	"slices"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/internal/textdist"
)

// Chord is a key combination resolved to QEMU qcodes: pressed in order and
// released in reverse order.
type Chord []string

// ParseChord resolves a key combination such as "ctrl+shift+t", "alt+Tab",
// "Return", "KP_0", "super", "ctrl++" or "!" to qcodes, case-insensitively
// (see namedKeys for the names). A name whose symbol needs shift on the US
// layout ("exclam", "!", "ISO_Left_Tab") adds shift before its key unless a
// shift is already in the chord. An unknown name is a *ValidationError whose
// Err is an *UnknownKeyError listing the closest valid names.
func ParseChord(chord string) (Chord, error) {
	names, err := splitChord(chord)
	if err != nil {
		return nil, err
	}
	return ParseKeys(names)
}

// ParseKeys resolves a list of key names pressed together, such as OpenAI's
// ["CTRL", "L"], like ParseChord.
func ParseKeys(names []string) (Chord, error) {
	if len(names) == 0 {
		return nil, Invalid("", "no key given")
	}
	var chord Chord
	for i, name := range names {
		e, err := lookupKey(name)
		if err != nil {
			return nil, withPrefix(err, "["+strconv.Itoa(i)+"]")
		}
		if e.shift && !slices.Contains(chord, "shift") && !slices.Contains(chord, "shift_r") {
			chord = append(chord, "shift")
		}
		if !slices.Contains(chord, e.qcode) {
			chord = append(chord, e.qcode)
		}
	}
	return chord, nil
}

// splitChord splits "ctrl+shift+t" into names. A "+" that would leave an
// empty name is the plus key itself, so "+", "ctrl++" and "+ +" work;
// spaces around names are ignored, but a lone " " is the space character.
func splitChord(chord string) ([]string, error) {
	if chord == "" {
		return nil, Invalid("", "no key given")
	}
	var names []string
	rest := chord
	for rest != "" {
		i := strings.IndexByte(rest, '+')
		var part string
		switch {
		case i < 0:
			part, rest = rest, ""
		case strings.TrimSpace(rest[:i]) == "" && rest[:i] != " ":
			// An empty name before "+": the "+" is the key. Skip the
			// separator after it, if any.
			part, rest = "+", rest[i+1:]
			if j := strings.IndexByte(rest, '+'); j >= 0 && strings.TrimSpace(rest[:j]) == "" {
				rest = rest[j+1:]
			}
		default:
			part, rest = rest[:i], rest[i+1:]
			if rest == "" {
				return nil, Invalid("", "chord %q ends with \"+\"", chord)
			}
		}
		if part != " " {
			part = strings.TrimSpace(part)
		}
		if part == "" {
			return nil, Invalid("", "chord %q has an empty key name", chord)
		}
		names = append(names, part)
	}
	return names, nil
}

// lookupKey finds one key name in the key table, case-insensitively.
func lookupKey(name string) (keyEntry, error) {
	if e, ok := keyIndex()[strings.ToLower(name)]; ok {
		return e, nil
	}
	uerr := &UnknownKeyError{Name: name, Suggestions: closestKeyNames(name, 3)}
	if n, ok := functionKeyNumber(name); ok && n >= 13 && n <= 24 {
		uerr.Hint = "QEMU 7.2 has no qcode for F13 to F24; they arrived in QEMU 8.0"
	}
	return keyEntry{}, &ValidationError{Reason: uerr.Error(), Err: uerr}
}

func functionKeyNumber(name string) (int, bool) {
	if len(name) < 2 || (name[0] != 'f' && name[0] != 'F') {
		return 0, false
	}
	n, err := strconv.Atoi(name[1:])
	return n, err == nil
}

// closestKeyNames returns up to n key names nearest to name by edit
// distance (case-insensitive), nearest first, ties in alphabetical order.
func closestKeyNames(name string, n int) []string {
	type scored struct {
		name string
		dist int
	}
	target := strings.ToLower(name)
	if len(target) > 64 {
		target = target[:64] // bound the work on hostile input
	}
	var all []scored
	for _, candidate := range keyNames() {
		if len(candidate) == 1 && len(target) > 2 {
			continue // single characters are poor suggestions for words
		}
		all = append(all, scored{candidate, textdist.Edit(target, strings.ToLower(candidate), 0)})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, n)
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.name)
	}
	return out
}
