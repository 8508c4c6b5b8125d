package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckText finds the first JSON string in data, a key or a value, that is
// not Unicode text: raw bytes that are not UTF-8, or a \u escape of half a
// UTF-16 surrogate pair (what Python's json.dumps writes for bytes it
// decoded with surrogateescape). encoding/json decodes both silently as
// U+FFFD, so without this a client's broken text would be typed as
// replacement characters. The error names the string's JSON path in the
// body's own names ("actions[0].text", "args.text"). Data that is not JSON
// is left to the decoder that reads it next, which says what is wrong.
func CheckText(data []byte) error {
	if utf8.Valid(data) && !maySurrogate(data) {
		return nil // nearly every body: no walk
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []textFrame
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		end := dec.InputOffset()
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:top]
			if top > 0 {
				stack[top-1].inValue = false
			}
			continue
		}
		s, isString := tok.(string)
		isKey := isString && top >= 0 && !stack[top].array && !stack[top].inValue
		if !isKey && top >= 0 && stack[top].array {
			stack[top].index++ // a value starts
		}
		if isString {
			raw := data[start:end]
			if reason := textFault(raw[bytes.IndexByte(raw, '"'):]); reason != "" {
				if isKey {
					return Invalid(textPath(stack[:top]), "a field name %s", reason)
				}
				return Invalid(textPath(stack), "%s", reason)
			}
			if isKey {
				stack[top].key, stack[top].inValue = s, true
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, textFrame{array: d == '[', index: -1})
			continue
		}
		if top >= 0 {
			stack[top].inValue = false // a scalar value ended
		}
	}
}

// textFrame is one open object or array on the way to a string.
type textFrame struct {
	array   bool
	index   int    // an array's current element
	key     string // an object's current field
	inValue bool   // an object's key was read, its value not yet
}

// textPath renders the JSON path of the value being read.
func textPath(stack []textFrame) string {
	path := ""
	for _, f := range stack {
		if f.array {
			path = fieldPath(path, "["+strconv.Itoa(f.index)+"]")
		} else {
			path = fieldPath(path, f.key)
		}
	}
	return path
}

// textFault says what is wrong with one JSON string token, quotes
// included, or "" when it is text.
func textFault(raw []byte) string {
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Sprintf("is not valid UTF-8 (byte 0x%02x at byte %d of the string): send text as UTF-8", s[i], i)
			}
			i += n
			continue
		}
		if i+1 >= len(s) {
			return "" // not JSON: the decoder reports it
		}
		if s[i+1] != 'u' {
			i += 2
			continue
		}
		r, ok := hex4(s[i+2:])
		if !ok {
			return "" // not JSON: the decoder reports it
		}
		switch {
		case utf16.IsSurrogate(rune(r)) && r < 0xdc00:
			if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if lo, ok := hex4(s[i+8:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 12
					continue
				}
			}
			return fmt.Sprintf(`holds \u%04x, the first half of a UTF-16 surrogate pair without its second, which is not a character: send text as UTF-8`, r)
		case utf16.IsSurrogate(rune(r)):
			return fmt.Sprintf(`holds \u%04x, the second half of a UTF-16 surrogate pair without its first, which is not a character: send text as UTF-8`, r)
		}
		i += 6
	}
	return ""
}

// hex4 reads four hex digits.
func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return uint16(n), err == nil
}

// maySurrogate says whether data may hold a \u escape of a surrogate
// (\uD800 to \uDFFF): a quick look that can say yes wrongly (an escaped
// backslash before "udc00"), never no wrongly.
func maySurrogate(data []byte) bool {
	for i := 0; i+3 < len(data); i++ {
		if data[i] == '\\' && data[i+1] == 'u' && (data[i+2]|0x20) == 'd' && bytes.IndexByte([]byte("89abcdefABCDEF"), data[i+3]) >= 0 {
			return true
		}
	}
	return false
}
