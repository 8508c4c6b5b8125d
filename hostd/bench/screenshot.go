package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
)

// shotSamples is the number of pictures per screenshot measurement.
const shotSamples = 30

// liveDesktop creates one desktop for a suite and waits for its screen.
func (e *env) liveDesktop(ctx context.Context) (desktop.Desktop, desktop.Machine, *screenshot.Capturer, error) {
	return e.liveDesktopOf(ctx, e.snap.Name)
}

// liveDesktopOf is liveDesktop from another snapshot. The desktop it
// returns (its ID set) is the caller's to delete, even with an error.
func (e *env) liveDesktopOf(ctx context.Context, snapshot string) (desktop.Desktop, desktop.Machine, *screenshot.Capturer, error) {
	d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: snapshot})
	if err != nil {
		return d, nil, nil, err
	}
	scr, ok := e.screens.Get(d.ID)
	if !ok {
		return d, nil, nil, fmt.Errorf("desktop %s has no screen", d.ID)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitNonBlank(wctx, scr.Mirror); err != nil {
		return d, nil, nil, err
	}
	m, _, err := e.mgr.Machine(ctx, d.ID, desktop.WaitNone)
	return d, m, scr.Capturer, err
}

// wiggle moves the pointer (the guest draws it into the framebuffer) and
// waits until the mirror has the change, so the next capture must encode.
func wiggle(ctx context.Context, m desktop.Machine, src screenshot.Source, i int) error {
	seq, _ := src.Changed()
	x, y := 300+(i%2)*400, 300+(i%3)*100
	if err := m.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: x, Y: y}}); err != nil {
		return err
	}
	ch, err := screenshot.WaitChanged(ctx, src, seq, 10*time.Second)
	if err != nil {
		return err
	}
	if !ch.Changed {
		return fmt.Errorf("the screen did not change after a pointer move")
	}
	return nil
}

func (e *env) screenshotSuite(ctx context.Context) error {
	d, m, capt, err := e.liveDesktop(ctx)
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	scr, _ := e.screens.Get(d.ID)
	src := scr.Mirror

	// An unchanged screen: the cache answers.
	if _, err := capt.Capture(ctx, screenshot.Options{}); err != nil {
		return err
	}
	var cached Dist
	for range 200 {
		start := time.Now()
		shot, err := capt.Capture(ctx, screenshot.Options{})
		if err != nil {
			return err
		}
		took := time.Since(start)
		if shot.Cached {
			cached.Add(took)
		}
	}
	if cached.N() == 0 {
		return fmt.Errorf("no capture of the unchanged screen was served from the cache")
	}
	e.res.dist("shot_cached", &cached)

	for _, f := range []struct {
		key  string
		opts screenshot.Options
	}{
		{"shot_changed_png", screenshot.Options{Format: screenshot.PNG}},
		{"shot_jpeg", screenshot.Options{Format: screenshot.JPEG, Quality: 80}},
		{"shot_scaled_xga_png", screenshot.Options{Format: screenshot.PNG, Width: 1024, Height: 768}},
	} {
		var dist, enc Dist
		for i := 0; i < shotSamples; i++ {
			if err := wiggle(ctx, m, src, i); err != nil {
				return err
			}
			start := time.Now()
			shot, err := capt.Capture(ctx, f.opts)
			if err != nil {
				return err
			}
			dist.Add(time.Since(start))
			enc.Add(shot.EncodeTime)
		}
		e.res.dist(f.key, &dist)
		e.progress("  %s: p50 %s", f.key, dist.Percentile(50))
	}

	var dump Dist
	for i := 0; i < shotSamples; i++ {
		start := time.Now()
		if _, err := m.Screendump(ctx); err != nil {
			return err
		}
		dump.Add(time.Since(start))
	}
	e.res.dist("screendump", &dump)
	e.progress("  QMP screendump: p50 %s", dump.Percentile(50))
	return nil
}
