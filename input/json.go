package input

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// UnmarshalJSON decodes a JSON array of canonical actions strictly, as
// DecodeBatch does, so a request type can hold a Batch and still report
// "actions[i].field" for what is wrong. JSON null leaves the batch empty.
func (b *Batch) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*b = nil
		return nil
	}
	batch, err := decodeBatch(data, "actions")
	if err != nil {
		return err
	}
	*b = batch
	return nil
}

// DecodeBatch decodes a JSON array of canonical actions strictly (see
// DecodeAction). Errors name fields as "actions[i].field".
func DecodeBatch(data []byte) (Batch, error) { return decodeBatch(data, "actions") }

func decodeBatch(data []byte, path string) (Batch, error) {
	items, err := parseArray(data)
	if err != nil {
		return nil, withPrefix(err, path)
	}
	batch := make(Batch, 0, len(items))
	for i, raw := range items {
		a, err := decodeAction(raw, fieldPath(path, "["+strconv.Itoa(i)+"]"))
		if err != nil {
			return nil, err
		}
		batch = append(batch, a)
	}
	return batch, nil
}

// DecodeAction decodes one canonical action, e.g.
//
//	{"action": "click", "x": 10, "y": 20, "button": "left", "count": 2, "modifiers": ["ctrl"]}
//
// Each kind accepts exactly its own fields: x, y (integers), button, count,
// modifiers (key names), path ([{"x":..,"y":..}, ...]), dx, dy (wheel
// notches), text, chord, repeat, keys, duration (seconds) and region
// ([x1, y1, x2, y2]). Value ranges are checked later, by validation.
func DecodeAction(data []byte) (Action, error) { return decodeAction(data, "") }

// actionFields lists the JSON fields each kind accepts besides "action".
func actionFields(k Kind) ([]string, bool) {
	switch k {
	case KindScreenshot, KindCursorPosition:
		return nil, true
	case KindClick:
		return []string{"x", "y", "button", "count", "modifiers"}, true
	case KindMove:
		return []string{"x", "y", "modifiers"}, true
	case KindDrag:
		return []string{"path", "button", "modifiers"}, true
	case KindMouseDown, KindMouseUp:
		return []string{"x", "y", "button"}, true
	case KindScroll:
		return []string{"x", "y", "dx", "dy", "modifiers"}, true
	case KindType:
		return []string{"text"}, true
	case KindKey:
		return []string{"chord", "repeat"}, true
	case KindHoldKey:
		return []string{"keys", "duration"}, true
	case KindWait:
		return []string{"duration"}, true
	case KindZoom:
		return []string{"region"}, true
	}
	return nil, false
}

func decodeAction(data []byte, path string) (Action, error) {
	o, err := parseObject(data, path)
	if err != nil {
		return Action{}, err
	}
	name, ok, err := o.str("action")
	if err != nil {
		return Action{}, err
	}
	if !ok {
		return Action{}, Invalid(o.field("action"), "required")
	}
	kind := Kind(name)
	fields, known := actionFields(kind)
	if !known {
		return Action{}, Invalid(o.field("action"), "unknown action %q (known: %v)", name, Kinds())
	}
	if err := o.onlyFields(append([]string{"action"}, fields...), name); err != nil {
		return Action{}, err
	}
	a := Action{Kind: kind}
	if a.At, err = decodeXY(o); err != nil {
		return Action{}, err
	}
	var b string
	if b, _, err = o.str("button"); err != nil {
		return Action{}, err
	}
	a.Button = Button(b)
	if a.Count, _, err = o.integer("count"); err != nil {
		return Action{}, err
	}
	if a.Modifiers, _, err = o.strs("modifiers"); err != nil {
		return Action{}, err
	}
	if len(a.Modifiers) == 0 {
		a.Modifiers = nil // no modifiers, however written
	}
	if a.Path, err = decodePath(o, "path"); err != nil {
		return Action{}, err
	}
	if a.DX, _, err = o.integer("dx"); err != nil {
		return Action{}, err
	}
	if a.DY, _, err = o.integer("dy"); err != nil {
		return Action{}, err
	}
	if a.Text, _, err = o.str("text"); err != nil {
		return Action{}, err
	}
	if a.Chord, _, err = o.str("chord"); err != nil {
		return Action{}, err
	}
	if a.Repeat, _, err = o.integer("repeat"); err != nil {
		return Action{}, err
	}
	if a.Keys, _, err = o.strs("keys"); err != nil {
		return Action{}, err
	}
	if a.Duration, _, err = o.seconds("duration"); err != nil {
		return Action{}, err
	}
	region, ok, err := o.ints("region", 4)
	if err != nil {
		return Action{}, err
	}
	if ok {
		a.Region = &Rect{X1: region[0], Y1: region[1], X2: region[2], Y2: region[3]}
	}
	return a, nil
}

// decodeXY reads the optional x, y pair; one without the other is an error.
func decodeXY(o object) (*Point, error) {
	x, hasX, err := o.integer("x")
	if err != nil {
		return nil, err
	}
	y, hasY, err := o.integer("y")
	if err != nil {
		return nil, err
	}
	switch {
	case hasX && hasY:
		return &Point{X: x, Y: y}, nil
	case hasX:
		return nil, Invalid(o.field("y"), "required when x is given")
	case hasY:
		return nil, Invalid(o.field("x"), "required when y is given")
	}
	return nil, nil
}

func decodePath(o object, key string) ([]Point, error) {
	items, ok, err := o.array(key)
	if !ok || err != nil {
		return nil, err
	}
	path := make([]Point, 0, len(items))
	for i, raw := range items {
		po, err := parseObject(raw, fieldPath(o.field(key), "["+strconv.Itoa(i)+"]"))
		if err != nil {
			return nil, err
		}
		if err := po.onlyFields([]string{"x", "y"}, "a path point"); err != nil {
			return nil, err
		}
		p, err := decodeXY(po)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, Invalid(po.field("x"), "required")
		}
		path = append(path, *p)
	}
	return path, nil
}

// MarshalJSON encodes the action in the form DecodeAction reads, with only
// the fields its kind accepts and that are set.
func (a Action) MarshalJSON() ([]byte, error) {
	m := map[string]any{"action": string(a.Kind)}
	fields, _ := actionFields(a.Kind)
	for _, f := range fields {
		switch f {
		case "x":
			if a.At != nil {
				m["x"], m["y"] = a.At.X, a.At.Y
			}
		case "button":
			if a.Button != "" {
				m["button"] = string(a.Button)
			}
		case "count":
			if a.Count != 0 {
				m["count"] = a.Count
			}
		case "modifiers":
			if len(a.Modifiers) > 0 {
				m["modifiers"] = a.Modifiers
			}
		case "path":
			if a.Path != nil {
				pts := make([]map[string]int, len(a.Path))
				for i, p := range a.Path {
					pts[i] = map[string]int{"x": p.X, "y": p.Y}
				}
				m["path"] = pts
			}
		case "dx":
			if a.DX != 0 {
				m["dx"] = a.DX
			}
		case "dy":
			if a.DY != 0 {
				m["dy"] = a.DY
			}
		case "text":
			m["text"] = a.Text
		case "chord":
			m["chord"] = a.Chord
		case "repeat":
			if a.Repeat != 0 {
				m["repeat"] = a.Repeat
			}
		case "keys":
			if a.Keys != nil {
				m["keys"] = a.Keys
			}
		case "duration":
			m["duration"] = durationSeconds(a.Duration)
		case "region":
			if a.Region != nil {
				m["region"] = []int{a.Region.X1, a.Region.Y1, a.Region.X2, a.Region.Y2}
			}
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON decodes with DecodeAction.
func (a *Action) UnmarshalJSON(data []byte) error {
	v, err := DecodeAction(data)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

func durationSeconds(d time.Duration) float64 {
	if d == math.MaxInt64 || d == math.MinInt64 {
		return math.Copysign(1e10, float64(d))
	}
	return d.Seconds()
}
