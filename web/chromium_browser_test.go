package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/warmdesk/warmdesk/internal/testenv"
)

// browser is one headless Debian Chromium; each tab has its own session
// storage, as separate browser tabs do.
type browser struct {
	ctx       context.Context
	artifacts string
}

// Window size of every tab: the viewer scales 1280x800 into what is left
// of it after its bars.
const winW, winH = 1400, 900

func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Require(t, "chromium")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium keeps calling home, which floods a closed
		// network and slows everything down.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(winW, winH),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("chromium started in %s", time.Since(start).Round(time.Millisecond))
	return &browser{ctx: ctx, artifacts: artifactDir(t)}
}

// artifactDir is where screenshots for people go: WARMDESK_ARTIFACTS when
// set (CI collects it), else a new temporary directory that is kept.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("WARMDESK_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "warmdesk-browser-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tab is one browser tab, with the page's console and uncaught exceptions
// in the test log.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	exceptions []string
}

func (b *browser) newTab(t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tb := &tab{t: t, ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`))
			}
			t.Logf("console.%s: %s", ev.Type, strings.Join(parts, " "))
		case *runtime.EventExceptionThrown:
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			t.Logf("page exception: %s", msg)
			tb.mu.Lock()
			tb.exceptions = append(tb.exceptions, msg)
			tb.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.exceptions) > 0 {
			t.Errorf("the page threw: %s", strings.Join(tb.exceptions, "; "))
		}
	})
	return tb
}

// run runs steps with a deadline.
func (tb *tab) run(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatal(err)
	}
}

// waitJS waits until a JavaScript expression is truthy.
func (tb *tab) waitJS(what, expr string, timeout time.Duration) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout))
	if _, err := chromedp.Run(ctx, poll); err != nil {
		tb.t.Fatalf("%s (waiting for %s): %v", what, expr, err)
	}
}

// eval evaluates an expression into out.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("%s: %v", expr, err)
	}
	return out
}

// screenPoint maps a point on the desktop's screen to the page, through
// the noVNC canvas's place and scale.
func (tb *tab) screenPoint(x, y int) (float64, float64) {
	tb.t.Helper()
	p := eval[[]float64](tb, fmt.Sprintf(`(() => {
		const c = document.querySelector('#screen canvas'), r = c.getBoundingClientRect();
		return [r.left + (%d + 0.5) * r.width / c.width, r.top + (%d + 0.5) * r.height / c.height];
	})()`, x, y))
	return p[0], p[1]
}

// canvas is what the viewer's noVNC canvas shows, at the canvas's own size.
func (tb *tab) canvas() image.Image {
	tb.t.Helper()
	url := eval[string](tb, `document.querySelector('#screen canvas').toDataURL('image/png')`)
	b64, ok := strings.CutPrefix(url, "data:image/png;base64,")
	if !ok {
		tb.t.Fatalf("canvas data URL %.40q", url)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		tb.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		tb.t.Fatal(err)
	}
	return img
}

// save writes a screenshot of the tab as an artifact.
func (b *browser) save(tb *tab, name string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join(b.artifacts, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("artifact: %s", path)
	return path
}
