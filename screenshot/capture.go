package screenshot

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"image"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/disintegration/imaging"
)

// Cache bounds used when CaptureConfig leaves them zero: a few formats and
// sizes of the current screen (a busy 1280x800 PNG is about 170 KB).
const (
	DefaultCacheEntries = 16
	DefaultCacheBytes   = 32 << 20
)

// CaptureConfig tunes a Capturer. The zero value is fine.
type CaptureConfig struct {
	CacheEntries int // pictures kept; 0 means DefaultCacheEntries
	CacheBytes   int // encoded bytes kept; 0 means DefaultCacheBytes
	PNGLevel     int // flate level; 0 means DefaultPNGLevel
}

// Capturer takes pictures of one Source, caching them per change counter
// and options, so asking twice for an unchanged screen encodes once and
// concurrent identical requests share one encode. Safe for concurrent use.
type Capturer struct {
	src    Source
	cache  *shotCache
	png    PNGEncoder
	jpeg   JPEGEncoder
	frames sync.Pool // *image.RGBA copies of the framebuffer
	seed   maphash.Seed
}

// NewCapturer returns a Capturer of src.
func NewCapturer(src Source, cfg CaptureConfig) *Capturer {
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = DefaultCacheEntries
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	return &Capturer{
		src:   src,
		cache: newShotCache(cfg.CacheEntries, cfg.CacheBytes),
		png:   PNGEncoder{Level: cfg.PNGLevel},
		seed:  maphash.MakeSeed(),
	}
}

// Shot is an encoded picture and what it shows.
type Shot struct {
	// Data is the encoded picture. It is shared with the cache and other
	// callers: never modify it.
	Data   []byte
	Format Format
	// Screen is the native framebuffer size.
	Screen image.Point
	// Region is the native area shown, within the screen.
	Region image.Rectangle
	// Scale maps between the picture and Region; Shot's own ToNative and
	// FromNative add Region's offset. Scale.Size() is the picture's size.
	Scale Scale
	// Counter is the change counter of the framebuffer content shown.
	Counter uint64
	// EncodeTime is what producing the picture took: copying the frame,
	// drawing the cursor, scaling and encoding. A cached picture keeps the
	// time of the encode that made it.
	EncodeTime time.Duration
	// CursorDrawn reports whether a cursor image was drawn into the picture.
	CursorDrawn bool
	// Cached reports whether this call encoded nothing: the picture was kept
	// from an earlier call or shared with a concurrent identical one.
	Cached bool
}

// Size returns the picture's size.
func (s Shot) Size() (w, h int) { return s.Scale.Size() }

// ContentType returns the picture's MIME type.
func (s Shot) ContentType() string { return s.Format.ContentType() }

// ToNative maps a pixel of the picture to the framebuffer pixel it shows.
// With Size and FromNative, a Shot maps coordinates like a Scale does, for
// whole-screen and region pictures alike.
func (s Shot) ToNative(x, y int) (int, int) {
	nx, ny := s.Scale.ToNative(x, y)
	return nx + s.Region.Min.X, ny + s.Region.Min.Y
}

// FromNative maps a framebuffer pixel to the picture's pixel showing it
// (clamped to the picture when it lies outside Region).
func (s Shot) FromNative(x, y int) (int, int) {
	return s.Scale.FromNative(x-s.Region.Min.X, y-s.Region.Min.Y)
}

// Capture returns a picture of the screen as opts say. An unchanged screen
// with the same options is served from the cache. It shows the mirror as it
// is: to see the effect of an action, WaitSettled or WaitChanged first.
// Invalid options, and a region entirely off the screen, are *OptionError.
func (c *Capturer) Capture(ctx context.Context, opts Options) (Shot, error) {
	if err := opts.Validate(); err != nil {
		return Shot{}, err
	}
	if err := ctx.Err(); err != nil {
		return Shot{}, fmt.Errorf("capture: %w", err)
	}
	o := opts.normalize()
	counter, _ := c.src.Changed()
	var cur cursorImage
	if o.Cursor {
		cur = cursorOf(c.src, c.seed)
	}
	key := cacheKey{counter: counter, opts: o, cursor: cur.sig}
	return c.cache.do(ctx, key, func() (Shot, error) {
		slots := *encodeSlots.Load()
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return Shot{}, fmt.Errorf("capture: waiting for an encoder: %w", ctx.Err())
		}
		defer func() { <-slots }()
		return c.capture(o, cur)
	})
}

// encodeSlots bounds the encodes running at once across every desktop of
// the process: each holds a frame copy and maybe a scaled picture (tens of
// MiB for large outputs), and more than the CPUs can run would only queue
// inside the encoders while holding that memory.
var encodeSlots atomic.Pointer[chan struct{}]

// DefaultEncodes is how many encodes run at once unless LimitEncodes says
// otherwise: max(2, GOMAXPROCS).
func DefaultEncodes() int { return max(2, runtime.GOMAXPROCS(0)) }

func init() { LimitEncodes(0) }

// LimitEncodes sets how many screenshot encodes run at once across the
// process (--screenshot-encodes); 0 or less takes DefaultEncodes. Encodes
// already running finish under the old bound.
func LimitEncodes(n int) {
	if n <= 0 {
		n = DefaultEncodes()
	}
	slots := make(chan struct{}, n)
	encodeSlots.Store(&slots)
}

// Stats returns what the cache did so far.
func (c *Capturer) Stats() CacheStats { return c.cache.snapshot() }

func (c *Capturer) capture(o Options, cur cursorImage) (Shot, error) {
	start := time.Now()
	buf, _ := c.frames.Get().(*image.RGBA)
	frame, counter := c.src.Frame(buf)
	if frame == nil {
		return Shot{}, errors.New("capture: the source returned no frame")
	}
	defer c.frames.Put(frame)
	shot, err := render(frame, o, cur, &c.png, &c.jpeg)
	if err != nil {
		return Shot{}, err
	}
	shot.Counter = counter
	shot.EncodeTime = time.Since(start)
	return shot, nil
}

// render draws the cursor into frame (which it may modify), crops, scales
// and encodes it. o must be normalized.
func render(frame *image.RGBA, o Options, cur cursorImage, pngEnc *PNGEncoder, jpegEnc *JPEGEncoder) (Shot, error) {
	bounds := frame.Bounds()
	region := bounds
	if o.Region != (image.Rectangle{}) {
		region = o.Region.Add(bounds.Min).Intersect(bounds)
		if region.Empty() {
			return Shot{}, &OptionError{Field: "region", Value: formatRegion(o.Region),
				Err: fmt.Errorf("outside the %dx%d screen", bounds.Dx(), bounds.Dy())}
		}
	}
	var scale Scale
	switch {
	case o.Width > 0 || o.Height > 0:
		scale = ScaleTo(region.Dx(), region.Dy(), o.Width, o.Height)
	case !o.Fit.IsZero():
		scale = FitWithin(region.Dx(), region.Dy(), o.Fit)
	default:
		scale = Identity(region.Dx(), region.Dy())
	}
	drawn := o.Cursor && cur.drawOn(frame, o.Pointer.Add(bounds.Min), region)

	var pic image.Image = frame.SubImage(region)
	if !scale.IsIdentity() {
		// Catmull-Rom, a sharp bicubic: text has to stay legible for a
		// model. Linear and box filters blur glyph strokes; Lanczos costs
		// more for no visible gain at the ratios used (1280 to 1024, 1920
		// to 1429).
		pic = imaging.Resize(pic, scale.ScaledW, scale.ScaledH, imaging.CatmullRom)
	}
	var data []byte
	var err error
	switch o.Format {
	case JPEG:
		data, err = jpegEnc.Encode(nil, pic, o.Quality)
	default:
		data, err = pngEnc.Encode(nil, pic)
	}
	if err != nil {
		return Shot{}, fmt.Errorf("capture: encode %s: %w", o.Format, err)
	}
	return Shot{
		Data:        data,
		Format:      o.Format,
		Screen:      bounds.Size(),
		Region:      region.Sub(bounds.Min),
		Scale:       scale,
		CursorDrawn: drawn,
	}, nil
}
