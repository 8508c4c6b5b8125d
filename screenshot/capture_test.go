package screenshot_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

func decode(t *testing.T, shot screenshot.Shot) image.Image {
	t.Helper()
	var img image.Image
	var err error
	switch shot.Format {
	case screenshot.JPEG:
		img, err = jpeg.Decode(bytes.NewReader(shot.Data))
	default:
		img, err = png.Decode(bytes.NewReader(shot.Data))
	}
	if err != nil {
		t.Fatalf("decode %s: %v", shot.Format, err)
	}
	if w, h := shot.Size(); img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Fatalf("decoded %v, Shot says %dx%d", img.Bounds().Size(), w, h)
	}
	return img
}

// assertShows checks that img shows exactly want's pixels in r.
func assertShows(t *testing.T, img image.Image, want *image.RGBA, r image.Rectangle) {
	t.Helper()
	if img.Bounds().Size() != r.Size() {
		t.Fatalf("picture is %v, region %v", img.Bounds().Size(), r.Size())
	}
	for y := 0; y < r.Dy(); y++ {
		for x := 0; x < r.Dx(); x++ {
			got := color.RGBAModel.Convert(img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y))
			if w := want.RGBAAt(r.Min.X+x, r.Min.Y+y); got != w {
				t.Fatalf("picture pixel (%d,%d) = %v, screen (%d,%d) = %v", x, y, got, r.Min.X+x, r.Min.Y+y, w)
			}
		}
	}
}

func TestCaptureWholeScreenPNG(t *testing.T) {
	frame := screenshottest.DesktopFrame(1280, 800, 1)
	src := screenshottest.NewSource(frame)
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
	shot, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertShows(t, decode(t, shot), frame, frame.Rect)
	if shot.Format != screenshot.PNG || shot.ContentType() != "image/png" {
		t.Errorf("format %q, content type %q", shot.Format, shot.ContentType())
	}
	if shot.Screen != image.Pt(1280, 800) || shot.Region != frame.Rect || !shot.Scale.IsIdentity() {
		t.Errorf("screen %v region %v scale %+v, want the whole 1280x800 screen unscaled", shot.Screen, shot.Region, shot.Scale)
	}
	if shot.Counter != src.Counter() || shot.EncodeTime <= 0 || shot.Cached || shot.CursorDrawn {
		t.Errorf("counter %d (source %d), encode time %v, cached %v, cursor %v", shot.Counter, src.Counter(), shot.EncodeTime, shot.Cached, shot.CursorDrawn)
	}
}

func TestCaptureJPEG(t *testing.T) {
	frame := screenshottest.DesktopFrame(1280, 800, 1)
	c := screenshot.NewCapturer(screenshottest.NewSource(frame), screenshot.CaptureConfig{})
	var sizes []int
	for _, q := range []int{30, 90} {
		shot, err := c.Capture(t.Context(), screenshot.Options{Format: screenshot.JPEG, Quality: q})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, shot)
		if shot.ContentType() != "image/jpeg" {
			t.Errorf("content type %q", shot.ContentType())
		}
		// Lossy: compare a flat area only.
		if got := color.RGBAModel.Convert(img.At(5, 5)).(color.RGBA); absDiff(got.B, frame.RGBAAt(5, 5).B) > 6 {
			t.Errorf("q%d: wallpaper pixel %v, want about %v", q, got, frame.RGBAAt(5, 5))
		}
		sizes = append(sizes, len(shot.Data))
	}
	if sizes[0] >= sizes[1] {
		t.Errorf("quality 30 gave %d bytes, quality 90 %d: quality ignored", sizes[0], sizes[1])
	}
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestCaptureRegion(t *testing.T) {
	frame := screenshottest.DesktopFrame(1280, 800, 1)
	c := screenshot.NewCapturer(screenshottest.NewSource(frame), screenshot.CaptureConfig{})
	tests := []struct {
		name   string
		region image.Rectangle
		want   image.Rectangle
	}{
		{"inside", image.Rect(600, 150, 901, 377), image.Rect(600, 150, 901, 377)},
		{"clipped at the corner", image.Rect(1200, 700, 1400, 900), image.Rect(1200, 700, 1280, 800)},
		{"one pixel", image.Rect(0, 0, 1, 1), image.Rect(0, 0, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shot, err := c.Capture(t.Context(), screenshot.Options{Region: tt.region})
			if err != nil {
				t.Fatal(err)
			}
			if shot.Region != tt.want {
				t.Fatalf("region %v, want %v", shot.Region, tt.want)
			}
			assertShows(t, decode(t, shot), frame, tt.want)
			w, h := shot.Size()
			if x, y := shot.ToNative(0, 0); x != tt.want.Min.X || y != tt.want.Min.Y {
				t.Errorf("ToNative(0,0) = %d,%d, want the region's corner %v", x, y, tt.want.Min)
			}
			if x, y := shot.ToNative(w-1, h-1); x != tt.want.Max.X-1 || y != tt.want.Max.Y-1 {
				t.Errorf("ToNative(last) = %d,%d, want %d,%d", x, y, tt.want.Max.X-1, tt.want.Max.Y-1)
			}
			if x, y := shot.FromNative(tt.want.Min.X, tt.want.Min.Y); x != 0 || y != 0 {
				t.Errorf("FromNative(corner) = %d,%d", x, y)
			}
		})
	}
	_, err := c.Capture(t.Context(), screenshot.Options{Region: image.Rect(2000, 0, 2100, 10)})
	var oe *screenshot.OptionError
	if !errors.As(err, &oe) || oe.Field != "region" {
		t.Errorf("off-screen region: err = %v, want an OptionError about region", err)
	}
	if _, err := c.Capture(t.Context(), screenshot.Options{Quality: 500}); !errors.As(err, &oe) || oe.Field != "quality" {
		t.Errorf("bad quality: err = %v, want an OptionError about quality", err)
	}
}

func TestCaptureScaled(t *testing.T) {
	tests := []struct {
		name         string
		screen       image.Point
		opts         screenshot.Options
		wantW, wantH int
	}{
		{"width only", image.Pt(1280, 800), screenshot.Options{Width: 1024}, 1024, 640},
		{"explicit XGA", image.Pt(1280, 800), screenshot.Options{Width: 1024, Height: 768}, 1024, 768},
		{"fit Anthropic's limits", image.Pt(1920, 1080), screenshot.Options{Fit: screenshot.AnthropicLimits()}, 1430, 804},
		{"fit leaves WXGA alone", image.Pt(1280, 800), screenshot.Options{Fit: screenshot.AnthropicLimits()}, 1280, 800},
		{"zoom into a region", image.Pt(1280, 800), screenshot.Options{Region: image.Rect(100, 100, 300, 225), Width: 800}, 800, 500},
		{"JPEG scaled", image.Pt(1280, 800), screenshot.Options{Format: screenshot.JPEG, Height: 400}, 640, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := screenshottest.DesktopFrame(tt.screen.X, tt.screen.Y, 3)
			c := screenshot.NewCapturer(screenshottest.NewSource(frame), screenshot.CaptureConfig{})
			shot, err := c.Capture(t.Context(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if w, h := shot.Size(); w != tt.wantW || h != tt.wantH {
				t.Fatalf("size %dx%d, want %dx%d", w, h, tt.wantW, tt.wantH)
			}
			img := decode(t, shot)
			// The scaled picture is opaque and, at a flat wallpaper pixel,
			// still the wallpaper colour.
			px := color.RGBAModel.Convert(img.At(img.Bounds().Min.X, img.Bounds().Min.Y)).(color.RGBA)
			want := frame.RGBAAt(shot.ToNative(0, 0))
			if px.A != 0xff || absDiff(px.R, want.R) > 8 || absDiff(px.G, want.G) > 8 || absDiff(px.B, want.B) > 8 {
				t.Errorf("corner pixel %v, screen shows %v", px, want)
			}
			if shot.Format == screenshot.PNG && shot.Data[25] != 2 {
				t.Errorf("scaled opaque PNG has colour type %d, want RGB", shot.Data[25])
			}
		})
	}
}

func redCursor() (*image.RGBA, image.Point) {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	draw.Draw(img, img.Rect, &image.Uniform{C: color.RGBA{0xff, 0, 0, 0xff}}, image.Point{}, draw.Src)
	img.SetRGBA(7, 7, color.RGBA{}) // a transparent corner
	return img, image.Pt(2, 3)
}

func TestCaptureDrawsTheCursor(t *testing.T) {
	frame := screenshottest.DesktopFrame(320, 200, 1)
	src := screenshottest.NewSource(frame)
	cursor, hotspot := redCursor()
	src.SetCursor(cursor, hotspot)
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
	red := color.RGBA{0xff, 0, 0, 0xff}

	shot, err := c.Capture(t.Context(), screenshot.Options{Cursor: true, Pointer: image.Pt(100, 50)})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, shot)
	if !shot.CursorDrawn {
		t.Error("CursorDrawn is false")
	}
	at := func(x, y int) color.RGBA { return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) }
	for _, p := range []image.Point{{98, 47}, {100, 50}, {104, 54}} {
		if got := at(p.X, p.Y); got != red {
			t.Errorf("pixel %v = %v, want the cursor's red", p, got)
		}
	}
	for _, p := range []image.Point{{105, 54}, {106, 50}, {97, 50}, {100, 46}} { // the transparent corner, and outside
		if got, want := at(p.X, p.Y), frame.RGBAAt(p.X, p.Y); got != want {
			t.Errorf("pixel %v = %v, want the screen's %v", p, got, want)
		}
	}

	plain, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertShows(t, decode(t, plain), frame, frame.Rect)

	// The pointer outside the region draws nothing there.
	off, err := c.Capture(t.Context(), screenshot.Options{Cursor: true, Pointer: image.Pt(300, 190), Region: image.Rect(0, 0, 50, 50)})
	if err != nil {
		t.Fatal(err)
	}
	if off.CursorDrawn {
		t.Error("CursorDrawn for a cursor outside the region")
	}
	assertShows(t, decode(t, off), frame, image.Rect(0, 0, 50, 50))

	// A new cursor shape on an unchanged screen is a new picture.
	green := image.NewRGBA(image.Rect(0, 0, 4, 4))
	draw.Draw(green, green.Rect, &image.Uniform{C: color.RGBA{0, 0xff, 0, 0xff}}, image.Point{}, draw.Src)
	src.SetCursor(green, image.Point{})
	again, err := c.Capture(t.Context(), screenshot.Options{Cursor: true, Pointer: image.Pt(100, 50)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Cached {
		t.Error("a new cursor shape was served from the cache")
	}
	if got := color.RGBAModel.Convert(decode(t, again).At(101, 51)); got != (color.RGBA{0, 0xff, 0, 0xff}) {
		t.Errorf("pixel under the new cursor = %v, want green", got)
	}

	// No cursor from the server: nothing to draw.
	src.SetCursor(nil, image.Point{})
	none, err := c.Capture(t.Context(), screenshot.Options{Cursor: true, Pointer: image.Pt(100, 50)})
	if err != nil {
		t.Fatal(err)
	}
	if none.CursorDrawn {
		t.Error("CursorDrawn without a cursor image")
	}
	assertShows(t, decode(t, none), frame, frame.Rect)
}

func TestCacheServesAnUnchangedScreen(t *testing.T) {
	src := newSource()
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
	first, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Capture(t.Context(), screenshot.Options{Format: screenshot.PNG, Quality: 12}) // same picture
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || !bytes.Equal(first.Data, second.Data) || first.Counter != second.Counter {
		t.Errorf("second capture cached=%v, same bytes=%v", second.Cached, bytes.Equal(first.Data, second.Data))
	}
	if s := c.Stats(); s.Encodes != 1 || s.Hits != 1 || src.FrameCalls() != 1 {
		t.Errorf("stats %+v, %d frame copies; want 1 encode, 1 hit, 1 copy", s, src.FrameCalls())
	}
	if _, err := c.Capture(t.Context(), screenshot.Options{Format: screenshot.JPEG}); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Encodes != 2 || s.Entries != 2 {
		t.Errorf("after a JPEG: stats %+v, want 2 encodes, 2 entries", s)
	}

	src.Touch()
	third, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if third.Cached || third.Counter != src.Counter() {
		t.Errorf("after a change: cached=%v counter=%d, want a fresh picture of %d", third.Cached, third.Counter, src.Counter())
	}
	if s := c.Stats(); s.Entries != 1 || s.Evictions != 2 {
		t.Errorf("after a change: stats %+v, want the two old pictures dropped", s)
	}
}

func TestCacheIsBounded(t *testing.T) {
	src := newSource()
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{CacheEntries: 3})
	for w := 10; w < 17; w++ {
		if _, err := c.Capture(t.Context(), screenshot.Options{Width: w}); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Entries != 3 || s.Evictions != 4 {
		t.Errorf("stats %+v, want 3 entries and 4 evictions", s)
	}
	// The most recent stay.
	if shot, _ := c.Capture(t.Context(), screenshot.Options{Width: 16}); !shot.Cached {
		t.Error("the newest picture was evicted")
	}
	if shot, _ := c.Capture(t.Context(), screenshot.Options{Width: 10}); shot.Cached {
		t.Error("the oldest picture was kept")
	}

	tiny := screenshot.NewCapturer(src, screenshot.CaptureConfig{CacheBytes: 10})
	for range 2 {
		if _, err := tiny.Capture(t.Context(), screenshot.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if s := tiny.Stats(); s.Entries != 0 || s.Encodes != 2 || s.Bytes != 0 {
		t.Errorf("10-byte cache: stats %+v, want nothing kept", s)
	}
}

func TestConcurrentIdenticalCapturesEncodeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		release := make(chan struct{})
		src.OnFrame(func() { <-release })
		c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
		const callers = 8
		shots := make([]screenshot.Shot, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				shots[i], errs[i] = c.Capture(context.Background(), screenshot.Options{Format: screenshot.JPEG})
			})
		}
		synctest.Wait() // one caller holds the frame copy, the others wait for it
		close(release)
		wg.Wait()
		cached := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !bytes.Equal(shots[i].Data, shots[0].Data) {
				t.Errorf("caller %d got other bytes", i)
			}
			if shots[i].Cached {
				cached++
			}
		}
		if s := c.Stats(); s.Encodes != 1 || s.Shared != callers-1 || src.FrameCalls() != 1 || cached != callers-1 {
			t.Errorf("stats %+v, %d frame copies, %d cached; want one encode shared by all", s, src.FrameCalls(), cached)
		}
	})
}

func TestWaiterGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		release := make(chan struct{})
		src.OnFrame(func() { <-release })
		c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
		var leader screenshot.Shot
		var leaderErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			leader, leaderErr = c.Capture(context.Background(), screenshot.Options{})
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		waiterErr := make(chan error)
		go func() {
			_, err := c.Capture(ctx, screenshot.Options{})
			waiterErr <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-waiterErr; !errors.Is(err, context.Canceled) {
			t.Errorf("waiter err = %v, want context.Canceled", err)
		}
		close(release)
		<-done
		if leaderErr != nil || len(leader.Data) == 0 {
			t.Errorf("leader: %v, %d bytes; want its picture", leaderErr, len(leader.Data))
		}
	})
}

func TestCaptureKeysByTheCounterItShows(t *testing.T) {
	src := newSource()
	touched := false
	src.OnFrame(func() {
		if !touched {
			touched = true
			src.Touch() // the screen changes between Changed and Frame
		}
	})
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
	first, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Counter != src.Counter() {
		t.Fatalf("counter %d, frame shows %d", first.Counter, src.Counter())
	}
	second, err := c.Capture(t.Context(), screenshot.Options{})
	if err != nil || !second.Cached {
		t.Errorf("second capture: cached=%v err=%v; want it served under the counter the frame showed", second.Cached, err)
	}
}

func TestCapturePanicReachesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		release := make(chan struct{})
		src.OnFrame(func() {
			<-release
			panic("broken mirror")
		})
		c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
		recovered := make(chan any)
		go func() {
			defer func() { recovered <- recover() }()
			c.Capture(context.Background(), screenshot.Options{})
		}()
		synctest.Wait()
		waiterErr := make(chan error)
		go func() {
			_, err := c.Capture(context.Background(), screenshot.Options{})
			waiterErr <- err
		}()
		synctest.Wait()
		close(release)
		if r := <-recovered; r == nil {
			t.Error("the leader's panic was swallowed")
		}
		if err := <-waiterErr; err == nil {
			t.Error("the waiter got no error from a panicked capture")
		}
		if s := c.Stats(); s.Entries != 0 {
			t.Errorf("stats %+v, want nothing kept", s)
		}
	})
}

func TestCaptureCancelled(t *testing.T) {
	c := screenshot.NewCapturer(newSource(), screenshot.CaptureConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Capture(ctx, screenshot.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestCaptureRace(t *testing.T) {
	src := screenshottest.NewSource(screenshottest.DesktopFrame(320, 200, 1))
	cursor, hotspot := redCursor()
	src.SetCursor(cursor, hotspot)
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{CacheEntries: 4})
	opts := []screenshot.Options{
		{}, {Format: screenshot.JPEG}, {Width: 160}, {Region: image.Rect(10, 10, 100, 100)},
		{Cursor: true, Pointer: image.Pt(50, 50)}, {Fit: screenshot.Limits{MaxPixels: 10000}},
	}
	ctx, cancel := context.WithCancel(t.Context())
	var changer sync.WaitGroup
	changer.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			src.Fill(image.Rect(i%300, 0, i%300+10, 10), &image.Uniform{C: color.RGBA{uint8(i), 0, 0, 0xff}})
		}
	})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				shot, err := c.Capture(ctx, opts[(g+i)%len(opts)])
				if err != nil {
					t.Error(err)
					return
				}
				decode(t, shot)
			}
		})
	}
	wg.Wait()
	cancel()
	changer.Wait()
}
