package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// object is one JSON object split into its fields, for decoding with errors
// that name the field. A JSON null counts as an absent field: SDKs serialise
// unset optional fields that way.
type object struct {
	path   string
	fields map[string]json.RawMessage
}

// maxCoordinate bounds every integer we accept, far beyond any screen, so
// arithmetic on decoded values cannot overflow.
const maxCoordinate = 1 << 30

// parseObject splits data, which must hold exactly one JSON object, into its
// fields. A field given twice is an error rather than last-one-wins.
func parseObject(data []byte, path string) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return object{}, Invalid(path, "not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return object{}, Invalid(path, "must be a JSON object")
	}
	o := object{path: path, fields: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return object{}, Invalid(path, "not valid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return object{}, Invalid(path, "not valid JSON: object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return object{}, Invalid(fieldPath(path, key), "not valid JSON: %v", err)
		}
		if _, dup := o.fields[key]; dup {
			return object{}, Invalid(fieldPath(path, key), "given more than once")
		}
		if string(raw) != "null" {
			o.fields[key] = raw
		}
	}
	if _, err := dec.Token(); err != nil {
		return object{}, Invalid(path, "not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return object{}, Invalid(path, "unexpected data after the JSON object")
	}
	return o, nil
}

func (o object) field(key string) string { return fieldPath(o.path, key) }

// onlyFields rejects any field not in allowed, naming the first in sorted
// order so the error is deterministic.
func (o object) onlyFields(allowed []string, what string) error {
	var unknown []string
	for k := range o.fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return Invalid(o.field(unknown[0]), "unknown field for %s (accepted: %v)", what, allowed)
}

func (o object) str(key string) (string, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, Invalid(o.field(key), "must be a string, got %s", jsonKind(raw))
	}
	return s, true, nil
}

func (o object) boolean(key string) (bool, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, true, Invalid(o.field(key), "must be a boolean, got %s", jsonKind(raw))
	}
	return b, true, nil
}

func (o object) integer(key string) (int, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return 0, false, nil
	}
	n, err := parseInteger(raw)
	if err != nil {
		return 0, true, withPrefix(err, o.field(key))
	}
	return n, true, nil
}

func (o object) strs(key string) ([]string, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return nil, false, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, true, Invalid(o.field(key), "must be an array of strings, got %s", jsonKind(raw))
	}
	return ss, true, nil
}

func (o object) array(key string) ([]json.RawMessage, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return nil, false, nil
	}
	items, err := parseArray(raw)
	if err != nil {
		return nil, true, withPrefix(err, o.field(key))
	}
	return items, true, nil
}

// ints decodes an array of exactly n integers, such as Anthropic's [x, y].
func (o object) ints(key string, n int) ([]int, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return nil, false, nil
	}
	v, err := parseInts(raw, n, o.field(key))
	return v, true, err
}

// parseInts decodes raw, an array of exactly n integers, reporting errors
// under field.
func parseInts(raw json.RawMessage, n int, field string) ([]int, error) {
	items, err := parseArray(raw)
	if err != nil {
		return nil, withPrefix(err, field)
	}
	if len(items) != n {
		return nil, Invalid(field, "must be an array of %d integers, got %d elements", n, len(items))
	}
	out := make([]int, n)
	for i, item := range items {
		v, err := parseInteger(item)
		if err != nil {
			return nil, withPrefix(err, fieldPath(field, "["+strconv.Itoa(i)+"]"))
		}
		out[i] = v
	}
	return out, nil
}

// seconds decodes a duration given as a JSON number of seconds.
func (o object) seconds(key string) (time.Duration, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return 0, false, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || !isJSONNumber(raw) {
		return 0, true, Invalid(o.field(key), "must be a number of seconds, got %s", jsonKind(raw))
	}
	f, err := n.Float64()
	if err != nil {
		return 0, true, Invalid(o.field(key), "must be a number of seconds: %v", err)
	}
	// Far over any limit: saturate instead of overflowing, so validation
	// reports "over the limit" rather than a wrapped-around value.
	if math.Abs(f) > 1e9 {
		return time.Duration(math.Copysign(math.MaxInt64, f)), true, nil
	}
	return time.Duration(f * float64(time.Second)), true, nil
}

func parseArray(raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, Invalid("", "must be an array, got %s", jsonKind(raw))
	}
	return items, nil
}

// parseInteger accepts a JSON number with an integral value (so 12 and 12.0,
// not 12.5) within ±maxCoordinate.
func parseInteger(raw json.RawMessage) (int, error) {
	if !isJSONNumber(raw) {
		return 0, Invalid("", "must be an integer, got %s", jsonKind(raw))
	}
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > maxCoordinate || n < -maxCoordinate {
			return 0, Invalid("", "%d is out of range", n)
		}
		return int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, Invalid("", "must be an integer, got %s", s)
	}
	if f != math.Trunc(f) {
		return 0, Invalid("", "must be an integer, got %s", s)
	}
	if f > maxCoordinate || f < -maxCoordinate {
		return 0, Invalid("", "%s is out of range", s)
	}
	return int(f), nil
}

func isJSONNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// jsonKind names the JSON type of raw for error messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
