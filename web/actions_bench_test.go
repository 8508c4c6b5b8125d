package web_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
	"github.com/warmdesk/warmdesk/web"
)

// The action path's own overhead, measured on the fake driver (whose
// SendInput only records the frame): request in, decoding, validation,
// the runner, the device's checks, SendInput, the answer out. What a real
// desktop adds (QMP, the guest) is the e2e test's to measure.

// benchServer is the real web server, Manager and drive service on the
// fake driver, with one running desktop whose screen is src.
func benchServer(b *testing.B) (h http.Handler, id string, src *screenshottest.Source) {
	b.Helper()
	f := drivetest.NewDesktop(b)
	f.Screen.Src.SetFrame(screenshottest.DesktopFrame(1280, 800, 1))
	svc := drive.New(b.Context(), drive.Config{Manager: f.Manager, Screens: f.Screens})
	srv := web.New(web.Config{Manager: f.Manager, Token: "t", Drive: svc})
	return srv.Handler(), f.ID, f.Screen.Src
}

// runBench posts body b.N times and reports the latency distribution;
// before each request (outside the timer) it calls between, if set.
func runBench(b *testing.B, body string, between func(src *screenshottest.Source)) {
	h, id, src := benchServer(b)
	path := "/v1/desktops/" + id + "/actions"
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		if between != nil {
			b.StopTimer()
			between(src)
			b.StartTimer()
		}
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e6, "p99-ms")
}

// BenchmarkActionMove is one action, one frame: request in to SendInput
// called, and the answer out.
func BenchmarkActionMove(b *testing.B) {
	runBench(b, `{"actions": [{"action": "move", "x": 640, "y": 400}]}`, nil)
}

// BenchmarkActionClickScaled is a click in a declared display space: three
// frames and a coordinate mapping.
func BenchmarkActionClickScaled(b *testing.B) {
	runBench(b, `{"actions": [{"action": "click", "x": 512, "y": 320}], "display_width": 1024, "display_height": 640}`, nil)
}

// BenchmarkActionBatchScreenshot is a click with its trailing screenshot
// taken at once (settle_ms 0): capture, PNG encoding and base64 JSON are
// the overhead beyond the guest's rendering and the quiet period. The
// screen changes before each request, so the capture cache never answers.
func BenchmarkActionBatchScreenshot(b *testing.B) {
	runBench(b, `{"actions": [{"action": "click", "x": 100, "y": 100}], "screenshot": true, "settle_ms": 0}`,
		func(src *screenshottest.Source) { src.Touch() })
}

// BenchmarkActionBatchScreenshotScaled is the same with the screenshot
// scaled to a declared 1024x640 display.
func BenchmarkActionBatchScreenshotScaled(b *testing.B) {
	runBench(b, `{"actions": [{"action": "click", "x": 100, "y": 100}], "screenshot": true, "settle_ms": 0, "display_width": 1024, "display_height": 640}`,
		func(src *screenshottest.Source) { src.Touch() })
}
