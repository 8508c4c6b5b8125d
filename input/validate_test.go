package input

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var native = NativeSpace{Width: 1280, Height: 800}

func TestValidateErrorsNameTheField(t *testing.T) {
	long := strings.Repeat("a", DefaultLimits().MaxTextRunes+1)
	many := make(Batch, DefaultLimits().MaxActions+1)
	for i := range many {
		many[i] = Action{Kind: KindScreenshot}
	}
	path := make([]Point, DefaultLimits().MaxPathPoints+1)
	for _, c := range []struct {
		name     string
		batch    Batch
		field    string
		contains string
	}{
		{"empty batch", Batch{}, "actions", "no actions"},
		{"too many actions", many, "actions", "over the limit of 100"},
		{"unknown kind", Batch{{Kind: "fly"}}, "actions[0].action", "unknown action"},
		{"x negative", Batch{{Kind: KindClick, At: &Point{-1, 0}}}, "actions[0].x", "outside the 1280x800"},
		{"x at width", Batch{{Kind: KindMove, At: &Point{1280, 0}}}, "actions[0].x", "outside"},
		{"y at height", Batch{{Kind: KindMouseDown, At: &Point{0, 800}}}, "actions[0].y", "outside"},
		{"move needs a point", Batch{{Kind: KindMove}}, "actions[0].x", "required"},
		{"count 4", Batch{{Kind: KindClick, Count: 4}}, "actions[0].count", "1, 2 or 3"},
		{"count negative", Batch{{Kind: KindClick, Count: -1}}, "actions[0].count", "1, 2 or 3"},
		{"unknown button", Batch{{Kind: KindClick, Button: "wheel"}}, "actions[0].button", "unknown button"},
		{"unknown modifier", Batch{{Kind: KindClick, Modifiers: []string{"ctrl", "hyperr"}}}, "actions[0].modifiers[1]", "unknown key"},
		{"too many modifiers", Batch{{Kind: KindScroll, Modifiers: strings.Fields("a b c d e f g h i")}}, "actions[0].modifiers", "over the limit"},
		{"empty drag", Batch{{Kind: KindDrag}}, "actions[0].path", "required"},
		{"drag point outside", Batch{{Kind: KindDrag, Path: []Point{{1, 1}, {1, 900}}}}, "actions[0].path[1].y", "outside"},
		{"drag too long", Batch{{Kind: KindDrag, Path: path}}, "actions[0].path", "over the limit"},
		{"scroll too far", Batch{{Kind: KindScroll, DY: 101}}, "actions[0].dy", "over the limit"},
		{"scroll too far left", Batch{{Kind: KindScroll, DX: -101}}, "actions[0].dx", "over the limit"},
		{"empty text", Batch{{Kind: KindType}}, "actions[0].text", "nothing to type"},
		{"long text", Batch{{Kind: KindType, Text: long}}, "actions[0].text", "over the limit"},
		{"control character", Batch{{Kind: KindType, Text: "a\x07b"}}, "actions[0].text", "control character U+0007"},
		{"invalid utf-8", Batch{{Kind: KindType, Text: "a\xffb"}}, "actions[0].text", "UTF-8"},
		{"unknown chord", Batch{{Kind: KindKey, Chord: "ctrl+Entr"}}, "actions[0].chord[1]", "closest valid names: Enter"},
		{"no chord", Batch{{Kind: KindKey}}, "actions[0].chord", "required"},
		{"repeat over", Batch{{Kind: KindKey, Chord: "a", Repeat: 101}}, "actions[0].repeat", "1 to 100"},
		{"hold no keys", Batch{{Kind: KindHoldKey, Duration: time.Second}}, "actions[0].keys", "required"},
		{"hold too long", Batch{{Kind: KindHoldKey, Keys: []string{"a"}, Duration: 11 * time.Second}}, "actions[0].duration", "over the limit of 10s"},
		{"wait too long", Batch{{Kind: KindWait, Duration: 10*time.Second + 1}}, "actions[0].duration", "over the limit"},
		{"wait negative", Batch{{Kind: KindWait, Duration: -time.Second}}, "actions[0].duration", "negative"},
		{"zoom needs region", Batch{{Kind: KindZoom}}, "actions[0].region", "required"},
		{"zoom inverted", Batch{{Kind: KindZoom, Region: &Rect{10, 10, 5, 20}}}, "actions[0].region", "x1 < x2"},
		{"zoom beyond", Batch{{Kind: KindZoom, Region: &Rect{0, 0, 1281, 800}}}, "actions[0].region", "outside"},
		{"field of another kind", Batch{{Kind: KindClick, Text: "hi"}}, "actions[0].text", "not accepted by click"},
		{"later action", Batch{{Kind: KindScreenshot}, {Kind: KindWait, Duration: time.Minute}}, "actions[1].duration", "over the limit"},
	} {
		err := Validate(c.batch, ValidateOptions{Space: native})
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err = %v, want a *ValidationError", c.name, err)
			continue
		}
		if ve.Field != c.field || !strings.Contains(ve.Error(), c.contains) {
			t.Errorf("%s: got %q (field %q), want field %q containing %q", c.name, ve.Error(), ve.Field, c.field, c.contains)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: not ErrInvalid", c.name)
		}
	}
}

func TestValidateAcceptsEdgesAndLimits(t *testing.T) {
	ok := Batch{
		{Kind: KindClick, At: &Point{0, 0}},
		{Kind: KindClick, At: &Point{1279, 799}, Count: 3},
		{Kind: KindZoom, Region: &Rect{0, 0, 1280, 800}},
		{Kind: KindWait, Duration: 10 * time.Second},
		{Kind: KindScroll, DY: -100, DX: 100},
		{Kind: KindType, Text: strings.Repeat("é", DefaultLimits().MaxTextRunes)},
		{Kind: KindKey, Chord: "a", Repeat: 100},
	}
	if err := Validate(ok, ValidateOptions{Space: native, HasGuest: true}); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestValidateNeedsASpace(t *testing.T) {
	if err := Validate(Batch{{Kind: KindScreenshot}}, ValidateOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no space: err = %v", err)
	}
	if err := Validate(Batch{{Kind: KindScreenshot}}, ValidateOptions{Space: NativeSpace{}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty space: err = %v", err)
	}
}

func TestCustomLimits(t *testing.T) {
	lim := Limits{MaxDuration: time.Second, MaxActions: 2}
	if err := Validate(Batch{{Kind: KindWait, Duration: 2 * time.Second}}, ValidateOptions{Space: native, Limits: lim}); err == nil {
		t.Error("a 2 s wait passed a 1 s limit")
	}
	if err := Validate(Batch{{Kind: KindScreenshot}, {Kind: KindScreenshot}, {Kind: KindScreenshot}}, ValidateOptions{Space: native, Limits: lim}); err == nil {
		t.Error("3 actions passed a limit of 2")
	}
}

func TestPlanTextSplitsNothing(t *testing.T) {
	plan, err := planText("abc ü def", "text")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Guest != "abc ü def" || plan.Strokes != nil {
		t.Errorf("plan = %+v, want the whole text through the guest", plan)
	}
	plan, err = planText("ab\r", "text")
	if err != nil || len(plan.Strokes) != 3 || plan.Strokes[2][0] != "ret" {
		t.Errorf("plan = %+v, %v: a lone carriage return is Return", plan, err)
	}
}

// clampingSpace maps like screenshot.Scale at 2x: points outside the space
// clamp to its edge pixels.
type clampingSpace struct{}

func (clampingSpace) Size() (int, int) { return 640, 400 }
func (clampingSpace) ToNative(x, y int) (int, int) {
	return min(max(x, 0), 639) * 1279 / 639, min(max(y, 0), 399) * 799 / 399
}
func (clampingSpace) FromNative(x, y int) (int, int) { return x / 2, y / 2 }

func TestZoomRegionKeepsItsLastPixelsInAClampingSpace(t *testing.T) {
	steps, err := Compile(Batch{{Kind: KindZoom, Region: &Rect{0, 0, 640, 400}}}, ValidateOptions{Space: clampingSpace{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := *steps[0].Region; got != (Rect{0, 0, 1280, 800}) {
		t.Errorf("region = %v, want the whole 1280x800 screen", got)
	}
}
