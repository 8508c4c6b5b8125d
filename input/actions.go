package input

import (
	"time"
)

// Kind names a canonical action.
type Kind string

// The canonical action vocabulary. Every adapter translates into it.
const (
	KindScreenshot     Kind = "screenshot"
	KindClick          Kind = "click"
	KindMove           Kind = "move"
	KindDrag           Kind = "drag"
	KindMouseDown      Kind = "mouse_down"
	KindMouseUp        Kind = "mouse_up"
	KindScroll         Kind = "scroll"
	KindType           Kind = "type"
	KindKey            Kind = "key"
	KindHoldKey        Kind = "hold_key"
	KindWait           Kind = "wait"
	KindCursorPosition Kind = "cursor_position"
	KindZoom           Kind = "zoom"
)

// Kinds lists every canonical action kind, in documentation order.
func Kinds() []Kind {
	return []Kind{
		KindScreenshot, KindClick, KindMove, KindDrag, KindMouseDown, KindMouseUp,
		KindScroll, KindType, KindKey, KindHoldKey, KindWait, KindCursorPosition, KindZoom,
	}
}

// Button is a pointer button of the canonical vocabulary.
type Button string

// Pointer buttons. The zero Button means ButtonLeft.
const (
	ButtonLeft    Button = "left"
	ButtonRight   Button = "right"
	ButtonMiddle  Button = "middle"
	ButtonBack    Button = "back"
	ButtonForward Button = "forward"
)

// qemuButton maps a canonical button to QEMU's InputButton name. Back and
// forward are Linux's BTN_SIDE and BTN_EXTRA, which QEMU calls side and extra.
func qemuButton(b Button) (string, bool) {
	switch b {
	case ButtonLeft, "":
		return "left", true
	case ButtonRight:
		return "right", true
	case ButtonMiddle:
		return "middle", true
	case ButtonBack:
		return "side", true
	case ButtonForward:
		return "extra", true
	}
	return "", false
}

// Point is a pixel position, x from the left edge and y from the top edge.
type Point struct{ X, Y int }

// Rect is a region: (X1, Y1) is its top-left pixel and (X2, Y2) the edge just
// past its bottom-right pixel, so X2-X1 is its width. This is Anthropic's
// zoom region [x1, y1, x2, y2].
type Rect struct{ X1, Y1, X2, Y2 int }

// Action is one canonical action. Which fields apply depends on Kind; the
// JSON form (see DecodeBatch) accepts exactly the fields of its kind.
type Action struct {
	Kind Kind

	// At is the pointer position for click, mouse_down, mouse_up and scroll
	// (nil: wherever the pointer is) and for move (required). JSON: x, y.
	At *Point
	// Button is the button of click, drag, mouse_down and mouse_up; empty
	// means left.
	Button Button
	// Count is the number of clicks of a click, 1 to 3; 0 means 1.
	Count int
	// Modifiers are key names held down around a click, move, drag or
	// scroll, e.g. ["ctrl", "shift"].
	Modifiers []string
	// Path is a drag's path: the button goes down at the first point and up
	// at the last. A single point drags from the current pointer position.
	Path []Point
	// DX and DY are a scroll's distance in wheel notches ("clicks" of the
	// wheel, what one detent of a real mouse wheel sends): positive DY
	// scrolls down, positive DX scrolls right.
	DX, DY int
	// Text is the text of a type action.
	Text string
	// Chord is a key action's key combination, e.g. "ctrl+shift+t",
	// "Return", "KP_0" (see ParseChord).
	Chord string
	// Repeat presses a key action's chord this many times; 0 means 1.
	Repeat int
	// Keys are the key names a hold_key action holds down together.
	Keys []string
	// Duration is how long wait waits or hold_key holds. JSON: seconds.
	Duration time.Duration
	// Region is a zoom action's region.
	Region *Rect
}

// Batch is a sequence of actions run in order.
type Batch []Action

// Limits bound what one batch may ask for. A value over a limit is a
// validation error naming the field. Zero fields take DefaultLimits' value.
type Limits struct {
	MaxActions       int           // actions in one batch
	MaxTextRunes     int           // runes in one type action
	MaxDuration      time.Duration // one wait or hold_key
	MaxRepeat        int           // repeats of one key action
	MaxScrollNotches int           // notches on each axis of one scroll
	MaxPathPoints    int           // points of one drag
	MaxChordKeys     int           // keys in one chord, hold_key or modifier set
}

// DefaultLimits returns the limits used when a Limits field is zero.
func DefaultLimits() Limits {
	return Limits{
		MaxActions:       100,
		MaxTextRunes:     4096,
		MaxDuration:      10 * time.Second,
		MaxRepeat:        100,
		MaxScrollNotches: 100,
		MaxPathPoints:    256,
		MaxChordKeys:     8,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxActions <= 0 {
		l.MaxActions = d.MaxActions
	}
	if l.MaxTextRunes <= 0 {
		l.MaxTextRunes = d.MaxTextRunes
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = d.MaxDuration
	}
	if l.MaxRepeat <= 0 {
		l.MaxRepeat = d.MaxRepeat
	}
	if l.MaxScrollNotches <= 0 {
		l.MaxScrollNotches = d.MaxScrollNotches
	}
	if l.MaxPathPoints <= 0 {
		l.MaxPathPoints = d.MaxPathPoints
	}
	if l.MaxChordKeys <= 0 {
		l.MaxChordKeys = d.MaxChordKeys
	}
	return l
}
