package input

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The xdotool adapter: the command lines E2B's desktop SDK sends for
// pointer and keyboard input (xdotool mousemove, click, mousedown,
// mouseup, type, key), read as canonical actions, so a daemon can run
// them on its own input path instead of in the guest.

var (
	// xdotoolTypeLine is the SDK's write(): xdotool type --delay MS --
	// WORD, the word quoted by the SDK's quoteString.
	xdotoolTypeLine = regexp.MustCompile(`(?s)^xdotool type --delay (0|[1-9][0-9]{0,4}) -- (.+)$`)
	// xdotoolKeyLine is press(): xdotool key CHORD, the SDK's key names
	// joined by "+".
	xdotoolKeyLine = regexp.MustCompile(`^xdotool key ([A-Za-z0-9_+]{1,64})$`)
	// xdotoolButtons maps xdotool's button numbers to ours.
	xdotoolButtons = map[string]Button{"1": ButtonLeft, "2": ButtonMiddle, "3": ButtonRight}
)

// DecodeXdotool reads one xdotool command line exactly as the SDK writes
// it: mousemove [--sync] X Y; click [--repeat N] B (4 and 5 the wheel);
// mousedown B; mouseup B; type --delay MS -- WORD; key CHORD. ok is false
// for anything else, including text the input path would refuse, so the
// caller can run the line as it is.
func DecodeXdotool(line string) (batch Batch, ok bool) {
	if m := xdotoolTypeLine.FindStringSubmatch(line); m != nil {
		text, ok := unquoteShellWord(m[2])
		// Text the SDK never sends (not UTF-8, NUL, over the batch
		// limit) is not ours to type.
		if !ok || text == "" || !utf8.ValidString(text) || strings.ContainsRune(text, 0) ||
			utf8.RuneCountInString(text) > DefaultLimits().MaxTextRunes {
			return nil, false
		}
		// The delay between keys is xdotool's pacing; the input path
		// paces keys itself.
		return Batch{{Kind: KindType, Text: text}}, true
	}
	if m := xdotoolKeyLine.FindStringSubmatch(line); m != nil {
		if _, err := ParseChord(m[1]); err != nil {
			return nil, false
		}
		return Batch{{Kind: KindKey, Chord: m[1]}}, true
	}
	f := strings.Split(line, " ")
	if len(f) < 3 || f[0] != "xdotool" {
		return nil, false
	}
	num := func(s string, max int) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= max && strconv.Itoa(n) == s
	}
	switch f[1] {
	case "mousemove":
		args := f[2:]
		if len(args) == 3 && args[0] == "--sync" {
			args = args[1:]
		}
		x, okx := num(args[0], 1<<15)
		if len(args) != 2 || !okx {
			return nil, false
		}
		y, oky := num(args[1], 1<<15)
		if !oky {
			return nil, false
		}
		return Batch{{Kind: KindMove, At: &Point{X: x, Y: y}}}, true
	case "click":
		repeat, args := 1, f[2:]
		if len(args) == 3 && args[0] == "--repeat" {
			n, ok := num(args[1], 100)
			if !ok || n < 1 {
				return nil, false
			}
			repeat, args = n, args[2:]
		}
		if len(args) != 1 {
			return nil, false
		}
		switch args[0] {
		case "4", "5": // the wheel, as xdotool sends it
			dy := repeat
			if args[0] == "4" {
				dy = -repeat
			}
			return Batch{{Kind: KindScroll, DY: dy}}, true
		}
		b, ok := xdotoolButtons[args[0]]
		if !ok || repeat > 3 {
			return nil, false
		}
		return Batch{{Kind: KindClick, Button: b, Count: repeat}}, true
	case "mousedown", "mouseup":
		b, ok := xdotoolButtons[f[2]]
		if len(f) != 3 || !ok {
			return nil, false
		}
		kind := KindMouseDown
		if f[1] == "mouseup" {
			kind = KindMouseUp
		}
		return Batch{{Kind: kind, Button: b}}, true
	}
	return nil, false
}

// shellWord is one word as the SDK's quoteString leaves it bare.
var shellWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// unquoteShellWord undoes the SDK's quoteString: a bare word of safe
// characters, or the text in single quotes with each ' written '"'"'.
// Only what quoteString itself produces is taken: the text quoted again
// must give back the word.
func unquoteShellWord(word string) (string, bool) {
	if shellWord.MatchString(word) {
		return word, true
	}
	if len(word) < 2 || word[0] != '\'' || word[len(word)-1] != '\'' {
		return "", false
	}
	text := strings.ReplaceAll(word[1:len(word)-1], `'"'"'`, "'")
	if shellWord.MatchString(text) || "'"+strings.ReplaceAll(text, "'", `'"'"'`)+"'" != word {
		return "", false
	}
	return text, true
}
