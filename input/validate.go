package input

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Step is one validated action, resolved to qcodes, QEMU button names and
// native coordinates: what the runner (drive) sends, with no name or
// coordinate left to look up.
type Step struct {
	Action Action

	At      *Point   // native; nil: wherever the pointer is
	Path    []Point  // native
	Region  *Rect    // native
	Button  string   // QEMU InputButton
	Count   int      // clicks, 1 to 3
	Mods    Chord    // held around a pointer action
	Notches []string // wheel buttons, one per notch, in order
	Text    TextPlan
	Chord   Chord
	Repeat  int
}

// ValidateOptions is what validation depends on besides the batch.
type ValidateOptions struct {
	Space  Space
	Limits Limits
	// HasGuest says whether text the US layout cannot type can go through a
	// Guest; without one such text is a validation error.
	HasGuest bool
}

// Validate checks a whole batch without sending anything: every action and
// field, every key name, every coordinate against the space (outside is an
// error, never a clamp), and every limit. It returns a *ValidationError
// naming the first offending field as "actions[i].field".
func Validate(batch Batch, opts ValidateOptions) error {
	_, err := Compile(batch, opts)
	return err
}

// Compile validates a whole batch as Validate does and resolves each action
// into a Step, in order.
func Compile(batch Batch, opts ValidateOptions) ([]Step, error) {
	lim := opts.Limits.withDefaults()
	if len(batch) == 0 {
		return nil, Invalid("actions", "no actions given")
	}
	if len(batch) > lim.MaxActions {
		return nil, Invalid("actions", "%d actions are over the limit of %d a batch", len(batch), lim.MaxActions)
	}
	if opts.Space == nil {
		return nil, Invalid("", "no coordinate space given")
	}
	if w, h := opts.Space.Size(); w <= 0 || h <= 0 {
		return nil, Invalid("", "coordinate space %dx%d is empty", w, h)
	}
	steps := make([]Step, 0, len(batch))
	for i, a := range batch {
		s, err := compileAction(a, opts, lim)
		if err != nil {
			return nil, withPrefix(err, "actions["+strconv.Itoa(i)+"]")
		}
		steps = append(steps, s)
	}
	return steps, nil
}

func compileAction(a Action, opts ValidateOptions, lim Limits) (Step, error) {
	s := Step{Action: a}
	var err error
	if _, known := actionFields(a.Kind); !known {
		return s, Invalid("action", "unknown action %q (known: %v)", a.Kind, Kinds())
	}
	if err := onlyKindFields(a); err != nil {
		return s, err
	}
	switch a.Kind {
	case KindClick, KindMove, KindMouseDown, KindMouseUp, KindScroll:
		if a.Kind == KindMove && a.At == nil {
			return s, Invalid("x", "required")
		}
		if a.At != nil {
			if s.At, err = toNative(*a.At, opts.Space, "x", "y"); err != nil {
				return s, err
			}
		}
	}
	switch a.Kind {
	case KindClick, KindDrag, KindMouseDown, KindMouseUp:
		var ok bool
		if s.Button, ok = qemuButton(a.Button); !ok {
			return s, Invalid("button", "unknown button %q (known: left, right, middle, back, forward)", a.Button)
		}
	}
	switch a.Kind {
	case KindClick, KindMove, KindDrag, KindScroll:
		if len(a.Modifiers) > 0 {
			if len(a.Modifiers) > lim.MaxChordKeys {
				return s, Invalid("modifiers", "%d keys are over the limit of %d", len(a.Modifiers), lim.MaxChordKeys)
			}
			if s.Mods, err = ParseKeys(a.Modifiers); err != nil {
				return s, withPrefix(err, "modifiers")
			}
		}
	}

	switch a.Kind {
	case KindClick:
		s.Count = a.Count
		if s.Count == 0 {
			s.Count = 1
		}
		if s.Count < 1 || s.Count > 3 {
			return s, Invalid("count", "must be 1, 2 or 3, got %d", a.Count)
		}
	case KindDrag:
		if len(a.Path) == 0 {
			return s, Invalid("path", "required: at least one point")
		}
		if len(a.Path) > lim.MaxPathPoints {
			return s, Invalid("path", "%d points are over the limit of %d", len(a.Path), lim.MaxPathPoints)
		}
		for i, p := range a.Path {
			n, err := toNative(p, opts.Space, "x", "y")
			if err != nil {
				return s, withPrefix(err, "path["+strconv.Itoa(i)+"]")
			}
			s.Path = append(s.Path, *n)
		}
	case KindScroll:
		for _, axis := range []struct {
			field string
			v     int
			neg   string
			pos   string
		}{{"dy", a.DY, "wheel-up", "wheel-down"}, {"dx", a.DX, "wheel-left", "wheel-right"}} {
			if axis.v > lim.MaxScrollNotches || axis.v < -lim.MaxScrollNotches {
				return s, Invalid(axis.field, "%d notches are over the limit of %d", axis.v, lim.MaxScrollNotches)
			}
			for range abs(axis.v) {
				if axis.v < 0 {
					s.Notches = append(s.Notches, axis.neg)
				} else {
					s.Notches = append(s.Notches, axis.pos)
				}
			}
		}
	case KindType:
		if a.Text == "" {
			return s, Invalid("text", "required: nothing to type")
		}
		if n := utf8.RuneCountInString(a.Text); n > lim.MaxTextRunes {
			return s, Invalid("text", "%d characters are over the limit of %d", n, lim.MaxTextRunes)
		}
		if s.Text, err = planText(a.Text, "text"); err != nil {
			return s, err
		}
		if s.Text.Guest != "" && !opts.HasGuest {
			return s, Invalid("text", "has characters the US keyboard layout cannot type, and this desktop has no guest agent to type them")
		}
	case KindKey:
		if a.Chord == "" {
			return s, Invalid("chord", "required")
		}
		if s.Chord, err = ParseChord(a.Chord); err != nil {
			return s, withPrefix(err, "chord")
		}
		if len(s.Chord) > lim.MaxChordKeys {
			return s, Invalid("chord", "%d keys are over the limit of %d", len(s.Chord), lim.MaxChordKeys)
		}
		s.Repeat = a.Repeat
		if s.Repeat == 0 {
			s.Repeat = 1
		}
		if s.Repeat < 1 || s.Repeat > lim.MaxRepeat {
			return s, Invalid("repeat", "must be 1 to %d, got %d", lim.MaxRepeat, a.Repeat)
		}
	case KindHoldKey:
		if len(a.Keys) == 0 {
			return s, Invalid("keys", "required: at least one key")
		}
		if len(a.Keys) > lim.MaxChordKeys {
			return s, Invalid("keys", "%d keys are over the limit of %d", len(a.Keys), lim.MaxChordKeys)
		}
		if s.Chord, err = ParseKeys(a.Keys); err != nil {
			return s, withPrefix(err, "keys")
		}
		if err := checkDuration(a.Duration, lim); err != nil {
			return s, err
		}
	case KindWait:
		if err := checkDuration(a.Duration, lim); err != nil {
			return s, err
		}
	case KindZoom:
		if a.Region == nil {
			return s, Invalid("region", "required")
		}
		if s.Region, err = regionToNative(*a.Region, opts.Space); err != nil {
			return s, err
		}
	}
	return s, nil
}

// onlyKindFields rejects set fields that the action's kind does not use, so
// a Go caller's mistake is caught as a JSON caller's would be.
func onlyKindFields(a Action) error {
	fields, _ := actionFields(a.Kind)
	set := []struct {
		field string
		isSet bool
	}{
		{"x", a.At != nil},
		{"button", a.Button != ""},
		{"count", a.Count != 0},
		{"modifiers", len(a.Modifiers) > 0},
		{"path", a.Path != nil},
		{"dx", a.DX != 0},
		{"dy", a.DY != 0},
		{"text", a.Text != ""},
		{"chord", a.Chord != ""},
		{"repeat", a.Repeat != 0},
		{"keys", a.Keys != nil},
		{"duration", a.Duration != 0},
		{"region", a.Region != nil},
	}
	for _, f := range set {
		if f.isSet && !slices.Contains(fields, f.field) {
			return Invalid(f.field, "not accepted by %s", a.Kind)
		}
	}
	return nil
}

func checkDuration(d time.Duration, lim Limits) error {
	if d < 0 {
		return Invalid("duration", "must not be negative")
	}
	if d > lim.MaxDuration {
		return Invalid("duration", "%v is over the limit of %v", d, lim.MaxDuration)
	}
	return nil
}

// toNative checks p against the space and maps it to native pixels.
func toNative(p Point, sp Space, fx, fy string) (*Point, error) {
	w, h := sp.Size()
	if p.X < 0 || p.X >= w {
		return nil, Invalid(fx, "%d is outside the %dx%d coordinate space (0 to %d)", p.X, w, h, w-1)
	}
	if p.Y < 0 || p.Y >= h {
		return nil, Invalid(fy, "%d is outside the %dx%d coordinate space (0 to %d)", p.Y, w, h, h-1)
	}
	x, y := sp.ToNative(p.X, p.Y)
	return &Point{X: x, Y: y}, nil
}

// regionToNative checks a zoom region, whose far edges may equal the size,
// and maps it to native pixels. The far edges map through the last pixel
// inside the region: a Space may clamp points outside it (screenshot.Scale
// does), so mapping the edge itself would lose the last row and column.
func regionToNative(r Rect, sp Space) (*Rect, error) {
	w, h := sp.Size()
	switch {
	case r.X1 < 0 || r.Y1 < 0:
		return nil, Invalid("region", "top-left corner (%d, %d) is outside the %dx%d coordinate space", r.X1, r.Y1, w, h)
	case r.X2 > w || r.Y2 > h:
		return nil, Invalid("region", "bottom-right corner (%d, %d) is outside the %dx%d coordinate space", r.X2, r.Y2, w, h)
	case r.X2 <= r.X1 || r.Y2 <= r.Y1:
		return nil, Invalid("region", "must have x1 < x2 and y1 < y2, got [%d, %d, %d, %d]", r.X1, r.Y1, r.X2, r.Y2)
	}
	x1, y1 := sp.ToNative(r.X1, r.Y1)
	x2, y2 := sp.ToNative(r.X2-1, r.Y2-1)
	return &Rect{X1: x1, Y1: y1, X2: x2 + 1, Y2: y2 + 1}, nil
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
