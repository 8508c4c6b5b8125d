package screenshot

import (
	"errors"
	"image"
	"net/url"
	"testing"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		query string
		want  Options
	}{
		{"", Options{}},
		{"format=png", Options{Format: PNG}},
		{"format=JPG&quality=55", Options{Format: JPEG, Quality: 55}},
		{"format=jpeg&width=1024&height=768", Options{Format: JPEG, Width: 1024, Height: 768}},
		{"width=640", Options{Width: 640}},
		{"region=10,20,300,200&width=600", Options{Region: image.Rect(10, 20, 310, 220), Width: 600}},
		{"region=+0,%200,1,1", Options{Region: image.Rect(0, 0, 1, 1)}},
		{"cursor=1", Options{Cursor: true}},
		{"cursor=false", Options{}},
		{"id=abc&token=x", Options{}}, // not ours: ignored
		{"format=png&quality=&width=&height=&region=&cursor=", Options{Format: PNG}},
		{"width=&width=300", Options{Width: 300}},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseOptions(q)
		if err != nil {
			t.Errorf("ParseOptions(%q): %v", tt.query, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseOptions(%q) = %+v, want %+v", tt.query, got, tt.want)
		}
	}
}

func TestParseOptionsErrorsNameTheField(t *testing.T) {
	tests := []struct{ query, field string }{
		{"format=gif", "format"},
		{"format=png&format=jpeg", "format"},
		{"quality=0", "quality"},
		{"quality=101", "quality"},
		{"quality=high", "quality"},
		{"width=0", "width"},
		{"width=-3", "width"},
		{"height=99999", "height"},
		{"height=1.5", "height"},
		{"region=1,2,3", "region"},
		{"region=1,2,0,5", "region"},
		{"region=-1,2,3,4", "region"},
		{"region=a,b,c,d", "region"},
		{"region=1,2,3,99999999999999999999", "region"},
		{"cursor=yes", "cursor"},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseOptions(q)
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Errorf("ParseOptions(%q) error = %v, want an *OptionError", tt.query, err)
			continue
		}
		if oe.Field != tt.field {
			t.Errorf("ParseOptions(%q) blames %q, want %q", tt.query, oe.Field, tt.field)
		}
	}
}

func TestParseRegion(t *testing.T) {
	r, err := ParseRegion("100, 50, 640, 480")
	if err != nil {
		t.Fatal(err)
	}
	if want := image.Rect(100, 50, 740, 530); r != want {
		t.Errorf("ParseRegion = %v, want %v", r, want)
	}
	for _, bad := range []string{"", "1,2,3,4,5", "1,,3,4", "0x10,0,1,1", "1,1,1,-1"} {
		if _, err := ParseRegion(bad); err == nil {
			t.Errorf("ParseRegion(%q) accepted", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		o     Options
		field string
	}{
		{Options{Format: "webp"}, "format"},
		{Options{Quality: 200}, "quality"},
		{Options{Width: -1}, "width"},
		{Options{Height: MaxOutputEdge + 1}, "height"},
		{Options{Region: image.Rect(-5, 0, 10, 10)}, "region"},
	}
	for _, tt := range bad {
		var oe *OptionError
		if err := tt.o.Validate(); !errors.As(err, &oe) || oe.Field != tt.field {
			t.Errorf("%+v.Validate() = %v, want an error about %s", tt.o, err, tt.field)
		}
	}
	if err := (Options{Format: JPEG, Quality: 90, Width: 100, Region: image.Rect(0, 0, 5, 5)}).Validate(); err != nil {
		t.Errorf("valid options rejected: %v", err)
	}
}

func TestNormalizeMergesEquivalentOptions(t *testing.T) {
	pairs := [][2]Options{
		{{}, {Format: PNG}},
		{{Format: PNG, Quality: 30}, {Format: PNG}},
		{{Format: JPEG}, {Format: JPEG, Quality: DefaultJPEGQuality}},
		{{Pointer: image.Pt(5, 5)}, {}},
		{{Width: 10, Fit: AnthropicLimits()}, {Width: 10}},
		{{Region: image.Rect(5, 5, 5, 9)}, {}},
	}
	for _, p := range pairs {
		if a, b := p[0].normalize(), p[1].normalize(); a != b {
			t.Errorf("%+v and %+v normalize apart: %+v, %+v", p[0], p[1], a, b)
		}
	}
	if a, b := (Options{Cursor: true, Pointer: image.Pt(1, 1)}).normalize(), (Options{Cursor: true}).normalize(); a == b {
		t.Error("pointer position dropped from a cursor capture's key")
	}
}

func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"", "format=jpeg&quality=80&width=1024&height=768&region=0,0,100,100&cursor=1", "region=1,2,3,4", "format=png&format=png", "quality=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		o, err := ParseOptions(q)
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field == "" {
				t.Fatalf("ParseOptions(%q) error %v is not an *OptionError naming a field", raw, err)
			}
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("ParseOptions(%q) = %+v, which does not validate: %v", raw, o, err)
		}
		back, err := ParseOptions(o.Query())
		if err != nil || back != o {
			t.Fatalf("round trip of %+v through %q = %+v, %v", o, o.Query().Encode(), back, err)
		}
	})
}

func FuzzParseRegion(f *testing.F) {
	f.Add("0,0,1280,800")
	f.Add(" 1, 2 ,3,4")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRegion(s)
		if err != nil {
			return
		}
		if r.Empty() || r.Min.X < 0 || r.Min.Y < 0 {
			t.Fatalf("ParseRegion(%q) = %v: empty or negative", s, r)
		}
		if back, err := ParseRegion(formatRegion(r)); err != nil || back != r {
			t.Fatalf("ParseRegion(formatRegion(%v)) = %v, %v", r, back, err)
		}
	})
}
