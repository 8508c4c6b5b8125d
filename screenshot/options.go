package screenshot

import (
	"errors"
	"fmt"
	"image"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Format is an image encoding.
type Format string

// Formats Capture writes.
const (
	PNG  Format = "png"
	JPEG Format = "jpeg"
)

// ContentType returns the format's MIME type.
func (f Format) ContentType() string {
	if f == JPEG {
		return "image/jpeg"
	}
	return "image/png"
}

// MaxOutputEdge bounds each side of a requested picture, so a query cannot
// make the host allocate gigabytes for a zoom.
const MaxOutputEdge = 8192

// maxCoordinate bounds region coordinates, far beyond any screen, so the
// arithmetic on them cannot overflow.
const maxCoordinate = 1 << 20

// Options say what to capture and how to encode it. The zero value is a PNG
// of the whole screen at native size. Options is comparable: it is part of
// the cache key.
type Options struct {
	// Format is PNG or JPEG; empty means PNG.
	Format Format
	// Quality is the JPEG quality, 1 to 100; 0 means DefaultJPEGQuality.
	// PNG ignores it.
	Quality int
	// Region is the part of the framebuffer to capture, in native pixels;
	// empty means the whole screen. It is clipped to the screen.
	Region image.Rectangle
	// Width and Height size the output picture. With one of them zero it
	// follows from the other and the region's aspect ratio; with both zero
	// the picture is native size, or fitted to Fit.
	Width, Height int
	// Fit bounds the picture size when Width and Height are both zero.
	Fit Limits
	// Cursor draws the pointer image (from Source.Cursor) at Pointer, for
	// servers that send it apart from the framebuffer. Pointer is in native
	// pixels; the caller knows it, since it moved the pointer there.
	Cursor  bool
	Pointer image.Point
}

// normalize fills defaults and clears fields that do not affect the output,
// so equivalent Options share a cache entry.
func (o Options) normalize() Options {
	if o.Format == "" {
		o.Format = PNG
	}
	switch o.Format {
	case PNG:
		o.Quality = 0
	case JPEG:
		if o.Quality == 0 {
			o.Quality = DefaultJPEGQuality
		}
	}
	if o.Region.Empty() {
		o.Region = image.Rectangle{}
	}
	if o.Width > 0 || o.Height > 0 {
		o.Fit = Limits{}
	}
	if !o.Cursor {
		o.Pointer = image.Point{}
	}
	return o
}

// Validate reports the first invalid field as an *OptionError.
func (o Options) Validate() error {
	switch o.Format {
	case "", PNG, JPEG:
	default:
		return &OptionError{Field: "format", Value: string(o.Format), Err: errors.New("want png or jpeg")}
	}
	if o.Quality < 0 || o.Quality > 100 {
		return &OptionError{Field: "quality", Value: strconv.Itoa(o.Quality), Err: errors.New("want 1 to 100")}
	}
	for _, side := range []struct {
		field string
		v     int
	}{{"width", o.Width}, {"height", o.Height}} {
		if side.v < 0 || side.v > MaxOutputEdge {
			return &OptionError{Field: side.field, Value: strconv.Itoa(side.v), Err: fmt.Errorf("want 0 (derived) to %d", MaxOutputEdge)}
		}
	}
	r := o.Region
	if r != (image.Rectangle{}) && (r.Min.X < 0 || r.Min.Y < 0 || r.Dx() <= 0 || r.Dy() <= 0 ||
		r.Min.X > maxCoordinate || r.Min.Y > maxCoordinate || r.Dx() > maxCoordinate || r.Dy() > maxCoordinate) {
		return &OptionError{Field: "region", Value: formatRegion(r), Err: errors.New("want a non-empty rectangle at non-negative coordinates")}
	}
	return nil
}

// OptionError is an invalid capture option, naming the query field.
type OptionError struct {
	Field string // query parameter name: format, quality, width, height, region, cursor
	Value string
	Err   error
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("screenshot option %s=%q: %v", e.Field, e.Value, e.Err)
}

func (e *OptionError) Unwrap() error { return e.Err }

// ParseOptions reads capture options from a query:
//
//	format=png|jpeg (jpg too)  quality=1..100  width=N  height=N
//	region=x,y,w,h (native pixels)  cursor=1|0|true|false
//
// An empty value counts as absent (forms send "width=" for an empty field).
// Other parameters are ignored; repeating one of these is an error. Errors
// are *OptionError, naming the field. Cursor's position is not in the
// query: the caller sets Options.Pointer.
func ParseOptions(q url.Values) (Options, error) {
	var o Options
	get := func(field string) (string, bool, error) {
		vs := slices.DeleteFunc(slices.Clone(q[field]), func(v string) bool { return v == "" })
		if len(vs) == 0 {
			return "", false, nil
		}
		if len(vs) > 1 {
			return "", false, &OptionError{Field: field, Value: strings.Join(vs, ","), Err: errors.New("given more than once")}
		}
		return vs[0], true, nil
	}
	if v, ok, err := get("format"); err != nil {
		return Options{}, err
	} else if ok {
		switch strings.ToLower(v) {
		case "png":
			o.Format = PNG
		case "jpeg", "jpg":
			o.Format = JPEG
		default:
			return Options{}, &OptionError{Field: "format", Value: v, Err: errors.New("want png or jpeg")}
		}
	}
	if v, ok, err := get("quality"); err != nil {
		return Options{}, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return Options{}, &OptionError{Field: "quality", Value: v, Err: errors.New("want an integer from 1 to 100")}
		}
		o.Quality = n
	}
	for _, side := range []struct {
		field string
		dst   *int
	}{{"width", &o.Width}, {"height", &o.Height}} {
		v, ok, err := get(side.field)
		if err != nil {
			return Options{}, err
		}
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxOutputEdge {
			return Options{}, &OptionError{Field: side.field, Value: v, Err: fmt.Errorf("want an integer from 1 to %d", MaxOutputEdge)}
		}
		*side.dst = n
	}
	if v, ok, err := get("region"); err != nil {
		return Options{}, err
	} else if ok {
		r, err := ParseRegion(v)
		if err != nil {
			return Options{}, &OptionError{Field: "region", Value: v, Err: err}
		}
		o.Region = r
	}
	if v, ok, err := get("cursor"); err != nil {
		return Options{}, err
	} else if ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Options{}, &OptionError{Field: "cursor", Value: v, Err: errors.New("want 1, 0, true or false")}
		}
		o.Cursor = b
	}
	return o, nil
}

// ParseRegion parses "x,y,w,h" in native pixels: a non-negative corner and a
// positive size. Spaces around the numbers are allowed.
func ParseRegion(s string) (image.Rectangle, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return image.Rectangle{}, fmt.Errorf("want x,y,w,h, got %d fields", len(parts))
	}
	var v [4]int
	names := [4]string{"x", "y", "w", "h"}
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return image.Rectangle{}, fmt.Errorf("%s is not an integer: %q", names[i], p)
		}
		lo := 0
		if i >= 2 {
			lo = 1
		}
		if n < lo || n > maxCoordinate {
			return image.Rectangle{}, fmt.Errorf("%s=%d out of range %d to %d", names[i], n, lo, maxCoordinate)
		}
		v[i] = n
	}
	return image.Rect(v[0], v[1], v[0]+v[2], v[1]+v[3]), nil
}

// Query returns the query parameters ParseOptions reads back into o (Fit
// and Pointer have no parameter and are left out).
func (o Options) Query() url.Values {
	q := url.Values{}
	if o.Format != "" {
		q.Set("format", string(o.Format))
	}
	if o.Quality != 0 {
		q.Set("quality", strconv.Itoa(o.Quality))
	}
	if o.Width != 0 {
		q.Set("width", strconv.Itoa(o.Width))
	}
	if o.Height != 0 {
		q.Set("height", strconv.Itoa(o.Height))
	}
	if o.Region != (image.Rectangle{}) {
		q.Set("region", formatRegion(o.Region))
	}
	if o.Cursor {
		q.Set("cursor", "1")
	}
	return q
}

// formatRegion writes r the way ParseRegion reads it.
func formatRegion(r image.Rectangle) string {
	return fmt.Sprintf("%d,%d,%d,%d", r.Min.X, r.Min.Y, r.Dx(), r.Dy())
}
