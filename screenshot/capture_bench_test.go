package screenshot_test

import (
	"image"
	"slices"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

// benchCapture runs Capture b.N times, changing the screen first when
// changed is set, and reports the median and 90th percentile latency.
func benchCapture(b *testing.B, w, h int, changed bool, opts screenshot.Options) {
	src := screenshottest.NewSource(screenshottest.DesktopFrame(w, h, 1))
	if opts.Cursor {
		arrow := image.NewRGBA(image.Rect(0, 0, 16, 16))
		for y := range 16 {
			for x := range y {
				arrow.Pix[arrow.PixOffset(x, y)+3] = 0xff // black, opaque
			}
		}
		src.SetCursor(arrow, image.Point{})
		opts.Pointer = image.Pt(w/2, h/2)
	}
	c := screenshot.NewCapturer(src, screenshot.CaptureConfig{})
	if _, err := c.Capture(b.Context(), opts); err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	var size int
	for b.Loop() {
		if changed {
			src.Touch()
		}
		start := time.Now()
		shot, err := c.Capture(b.Context(), opts)
		times = append(times, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if shot.Cached == changed {
			b.Fatalf("cached=%v on a changed=%v screen", shot.Cached, changed)
		}
		size = len(shot.Data)
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e6, "p50-ms")
	b.ReportMetric(float64(times[len(times)*9/10].Nanoseconds())/1e6, "p90-ms")
	b.ReportMetric(float64(size), "bytes")
}

func BenchmarkCaptureUnchangedPNG(b *testing.B) {
	benchCapture(b, 1280, 800, false, screenshot.Options{})
}

func BenchmarkCaptureChangedPNG(b *testing.B) {
	benchCapture(b, 1280, 800, true, screenshot.Options{})
}

func BenchmarkCaptureChangedJPEG(b *testing.B) {
	benchCapture(b, 1280, 800, true, screenshot.Options{Format: screenshot.JPEG, Quality: 80})
}

func BenchmarkCaptureChangedPNGScaledTo1024(b *testing.B) {
	benchCapture(b, 1280, 800, true, screenshot.Options{Width: 1024})
}

func BenchmarkCaptureChangedPNGFullHDFitAnthropic(b *testing.B) {
	benchCapture(b, 1920, 1080, true, screenshot.Options{Fit: screenshot.AnthropicLimits()})
}

func BenchmarkCaptureChangedPNGZoomRegion(b *testing.B) {
	benchCapture(b, 1280, 800, true, screenshot.Options{Region: image.Rect(600, 200, 1000, 450), Width: 1024})
}

func BenchmarkCaptureChangedPNGWithCursor(b *testing.B) {
	benchCapture(b, 1280, 800, true, screenshot.Options{Cursor: true})
}

func BenchmarkScaleMapping(b *testing.B) {
	s := screenshot.FitWithin(1920, 1080, screenshot.AnthropicLimits())
	x := 0
	for b.Loop() {
		nx, ny := s.ToNative(x%1429, x%804)
		sx, _ := s.FromNative(nx, ny)
		x += sx&1 + 1
	}
}

func BenchmarkFitWithin(b *testing.B) {
	for b.Loop() {
		screenshot.FitWithin(1920, 1080, screenshot.AnthropicLimits())
	}
}
