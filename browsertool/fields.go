package browsertool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/warmdesk/warmdesk/input"
)

// fieldReader reads a member's fields one by one, keeping the first error
// (later reads do nothing), so Decode reads as the member's schema.
type fieldReader struct {
	member string
	obj    map[string]json.RawMessage
	err    error
}

func (f *fieldReader) fail(field, format string, args ...any) {
	if f.err == nil {
		f.err = &InputError{Member: f.member, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
}

// decode reads field into v, or records what type was wanted.
func (f *fieldReader) decode(field string, v any, want string) bool {
	if f.err != nil {
		return false
	}
	raw := bytes.TrimSpace(f.obj[field])
	if bytes.Equal(raw, []byte("null")) {
		f.fail(field, "must be %s, not null", want)
		return false
	}
	// json.Number takes a quoted number too: a number field must not.
	if _, isNumber := v.(*json.Number); isNumber && len(raw) > 0 && raw[0] == '"' {
		f.fail(field, "must be %s: got a JSON string", want)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		f.fail(field, "must be %s: %s", want, typeProblem(err))
		return false
	}
	return true
}

// typeProblem shortens encoding/json's type errors to what was sent.
func typeProblem(err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return "got a JSON " + te.Value
	}
	return err.Error()
}

func (f *fieldReader) str(field string) string {
	var s string
	f.decode(field, &s, "a string")
	return s
}

func (f *fieldReader) nonEmpty(field string) string {
	s := f.str(field)
	if f.err == nil && strings.TrimSpace(s) == "" {
		f.fail(field, "must not be empty")
	}
	return s
}

func (f *fieldReader) enum(field string, allowed ...string) string {
	s := f.str(field)
	if f.err == nil && !slices.Contains(allowed, s) {
		f.fail(field, "%q is not one of %s", s, strings.Join(allowed, ", "))
	}
	return s
}

// integer reads a JSON number that is a whole number.
func (f *fieldReader) integer(field string) (int, bool) {
	var n json.Number
	if !f.decode(field, &n, "an integer") {
		return 0, false
	}
	v, err := n.Int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		f.fail(field, "must be an integer, got %s", n)
		return 0, false
	}
	return int(v), true
}

// intIn reads an optional integer in [lo, hi], def when absent.
func (f *fieldReader) intIn(field string, lo, hi, def int) int {
	if _, ok := f.obj[field]; !ok {
		return def
	}
	v, ok := f.integer(field)
	if ok && (v < lo || v > hi) {
		if hi == math.MaxInt32 {
			f.fail(field, "must be at least %d, got %d", lo, v)
		} else {
			f.fail(field, "must be from %d to %d, got %d", lo, hi, v)
		}
	}
	return v
}

// seconds reads a duration in seconds, a number from 0 to MaxSeconds.
func (f *fieldReader) seconds(field string) float64 {
	var n json.Number
	if !f.decode(field, &n, "a number of seconds") {
		return 0
	}
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || v < 0 || v > MaxSeconds {
		f.fail(field, "must be a number of seconds from 0 to %d, got %s", MaxSeconds, n)
		return 0
	}
	return v
}

// pixel reads a JSON number that is a whole, non-negative pixel.
func pixel(raw json.RawMessage) (int, bool) {
	var n json.Number
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	v, err := n.Int64()
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

func (f *fieldReader) region(field string) [4]int {
	var ns []json.RawMessage
	if !f.decode(field, &ns, "[x0, y0, x1, y1] in viewport pixels") {
		return [4]int{}
	}
	var r [4]int
	if len(ns) != 4 {
		f.fail(field, "must be [x0, y0, x1, y1] in viewport pixels: got %d numbers", len(ns))
		return r
	}
	for i, n := range ns {
		v, ok := pixel(n)
		if !ok {
			f.fail(fmt.Sprintf("%s[%d]", field, i), "must be a whole number of pixels, at least 0, got %s", n)
			return r
		}
		r[i] = v
	}
	if r[2] <= r[0] || r[3] <= r[1] {
		f.fail(field, "x1 must be greater than x0 and y1 than y0: got %v", r)
	}
	return r
}

// refPattern is the form of the refs this package's executors hand out
// (read_page and find tag elements [ref_N]).
var refPattern = regexp.MustCompile(`^ref_[0-9]+$`)

func (f *fieldReader) ref(field string) string {
	s := f.str(field)
	if f.err == nil && !refPattern.MatchString(s) {
		f.fail(field, "%q is not an element ref: read_page and find give refs like ref_7", s)
	}
	return s
}

// target reads a Target: a coordinate, or (when refs) an element ref.
func (f *fieldReader) target(field string, refs bool) Target {
	var t struct {
		Type string          `json:"type"`
		Ref  *string         `json:"ref"`
		X    json.RawMessage `json:"x"`
		Y    json.RawMessage `json:"y"`
	}
	want := `{"type": "coordinate", "x": X, "y": Y}`
	if refs {
		want += ` or {"type": "ref", "ref": "ref_N"}`
	}
	if !f.decode(field, &t, want) {
		return Target{}
	}
	switch {
	case t.Type == "ref" && refs:
		if t.Ref == nil || t.X != nil || t.Y != nil {
			f.fail(field, `a ref target is {"type": "ref", "ref": "ref_N"} and nothing else`)
			return Target{}
		}
		if !refPattern.MatchString(*t.Ref) {
			f.fail(field+".ref", "%q is not an element ref: read_page and find give refs like ref_7", *t.Ref)
			return Target{}
		}
		return Target{Ref: *t.Ref}
	case t.Type == "coordinate":
		if t.Ref != nil || t.X == nil || t.Y == nil {
			f.fail(field, `a coordinate target is {"type": "coordinate", "x": X, "y": Y} and nothing else`)
			return Target{}
		}
		x, okX := pixel(t.X)
		y, okY := pixel(t.Y)
		if !okX || !okY {
			f.fail(field, "x and y must be whole viewport pixels, at least 0: got %s, %s", t.X, t.Y)
			return Target{}
		}
		return Target{X: x, Y: y}
	case t.Type == "ref":
		f.fail(field+".type", "%s takes a coordinate target only", f.member)
	default:
		f.fail(field+".type", "%q is not a target type: want %s", t.Type, want)
	}
	return Target{}
}

func (f *fieldReader) refTarget(field string) Target {
	t := f.target(field, true)
	if f.err == nil && !t.IsRef() {
		f.fail(field+".type", "%s takes an element ref target only: {\"type\": \"ref\", \"ref\": \"ref_N\"}", f.member)
	}
	return t
}

// modifierNames are the keys a click may hold.
var modifierNames = []string{"shift", "ctrl", "control", "alt", "option", "cmd", "command", "meta", "super", "win"}

// chord reads a click's modifiers: one chord such as "ctrl+shift".
func (f *fieldReader) chord(field string) []string {
	s := f.nonEmpty(field)
	if f.err != nil {
		return nil
	}
	var mods []string
	for _, m := range strings.Split(s, "+") {
		m = strings.ToLower(strings.TrimSpace(m))
		if !slices.Contains(modifierNames, m) {
			f.fail(field, "%q is not a modifier key: want a chord of %s, such as \"ctrl+shift\"", m, strings.Join(modifierNames, ", "))
			return nil
		}
		mods = append(mods, m)
	}
	return mods
}

// keys reads key's and hold_key's text: a key, a "+" chord, or chords
// separated by spaces, each known to the key table.
func (f *fieldReader) keys(field string) string {
	s := f.nonEmpty(field)
	if f.err != nil {
		return s
	}
	for _, chord := range strings.Fields(s) {
		if _, err := input.ParseChord(chord); err != nil {
			f.fail(field, "%v", err)
			return s
		}
	}
	return s
}

// value reads form_input's value: a string, a number or a boolean.
func (f *fieldReader) value(field string) any {
	var v any
	if !f.decode(field, &v, "a string, a number or a boolean") {
		return nil
	}
	switch x := v.(type) {
	case string, bool:
		return x
	case json.Number:
		n, err := x.Float64()
		if err != nil {
			f.fail(field, "must be a finite number, got %s", x)
			return nil
		}
		return n
	}
	f.fail(field, "must be a string, a number or a boolean")
	return nil
}

func (f *fieldReader) strings(field string) []string {
	if _, ok := f.obj[field]; !ok {
		return nil
	}
	var ss []string
	if !f.decode(field, &ss, "a list of strings") {
		return nil
	}
	for i, s := range ss {
		if strings.TrimSpace(s) == "" {
			f.fail(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
			return nil
		}
	}
	return ss
}
