package drive

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

var native = input.NativeSpace{Width: 1280, Height: 800}

func run(t *testing.T, r *runner, batch input.Batch, opts runOptions) input.BatchResult {
	t.Helper()
	if opts.Space == nil {
		opts.Space = native
	}
	res, err := r.Run(context.Background(), batch, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestClickAtZeroReallyMovesThere(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindClick, At: &input.Point{X: 0, Y: 0}}}, runOptions{})
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{mv(0, 0)},
		[]desktop.InputEvent{btn("left", true)},
		[]desktop.InputEvent{btn("left", false)},
	)
}

func TestClickWithoutPointClicksInPlace(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindClick, Button: input.ButtonRight}}, runOptions{})
	assertFrames(t, dev.Frames(), []desktop.InputEvent{btn("right", true)}, []desktop.InputEvent{btn("right", false)})
}

func TestTripleClickWithModifiersHoldsThemAround(t *testing.T) {
	r, dev, clock := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindClick, At: &input.Point{X: 10, Y: 20}, Count: 3, Modifiers: []string{"ctrl", "shift"}}}, runOptions{})
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{key("ctrl", true), key("shift", true)},
		[]desktop.InputEvent{mv(10, 20)},
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{btn("left", false)},
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{btn("left", false)},
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{btn("left", false)},
		[]desktop.InputEvent{key("shift", false), key("ctrl", false)},
	)
	// The release waits one keystroke interval after the press: the fake
	// clock does not advance during sends, so the whole interval remains.
	if got := clock.Sleeps(); len(got) != 1 || got[0] != DefaultKeystrokeInterval {
		t.Errorf("sleeps = %v, want one of %v", got, DefaultKeystrokeInterval)
	}
}

func TestButtonsMapToQEMUNames(t *testing.T) {
	for b, want := range map[input.Button]string{
		"": "left", input.ButtonLeft: "left", input.ButtonRight: "right", input.ButtonMiddle: "middle",
		input.ButtonBack: "side", input.ButtonForward: "extra",
	} {
		r, dev, _ := newTestRunner(t, nil)
		run(t, r, input.Batch{{Kind: input.KindClick, Button: b}}, runOptions{})
		assertFrames(t, dev.Frames(), []desktop.InputEvent{btn(want, true)}, []desktop.InputEvent{btn(want, false)})
	}
}

func TestScaledSpaceMapsToNativeAndBack(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	space := scaleSpace{w: 640, h: 400, factor: 2}
	res := run(t, r, input.Batch{
		{Kind: input.KindMove, At: &input.Point{X: 639, Y: 399}},
		{Kind: input.KindCursorPosition},
		{Kind: input.KindZoom, Region: &input.Rect{X1: 10, Y1: 20, X2: 640, Y2: 400}},
	}, runOptions{Space: space})
	assertFrames(t, dev.Frames(), []desktop.InputEvent{mv(1278, 798)})
	if c := res.Results[1].Cursor; c == nil || *c != (input.Point{X: 639, Y: 399}) {
		t.Errorf("cursor = %v, want (639, 399) in the scaled space", c)
	}
	// The far edge maps through the region's last pixel (639 → 1278) + 1.
	if z := res.Zoom; z == nil || *z != (input.Rect{X1: 20, Y1: 40, X2: 1279, Y2: 799}) {
		t.Errorf("zoom = %v, want the native region", z)
	}
	if !res.Screenshot {
		t.Error("a batch ending in zoom should want a trailing capture")
	}
}

func TestTypeUSTextOneKeystrokePerFramePaced(t *testing.T) {
	r, dev, clock := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindType, Text: "aA!\"\n\t \r\n"}}, runOptions{})
	assertFrames(t, dev.Frames(),
		tap("a"),
		tap("shift", "a"),
		tap("shift", "1"),
		tap("shift", "apostrophe"),
		tap("ret"),
		tap("tab"),
		tap("spc"),
		tap("ret"), // "\r\n" is one Return
	)
	sleeps := clock.Sleeps()
	if len(sleeps) != 7 {
		t.Fatalf("sleeps = %v, want 7 keystroke intervals between 8 keystrokes", sleeps)
	}
	for _, s := range sleeps {
		if s != DefaultKeystrokeInterval {
			t.Errorf("sleep %v, want %v", s, DefaultKeystrokeInterval)
		}
	}
}

func TestTypingRateIsConfigurable(t *testing.T) {
	dev := &recordingDevice{}
	r, err := newRunner(runnerConfig{Device: dev, KeystrokeInterval: 12 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(0, 0)}
	r.now, r.sleep = clock.now, clock.sleep
	run(t, r, input.Batch{{Kind: input.KindType, Text: "ab"}}, runOptions{})
	if got := clock.Sleeps(); len(got) != 1 || got[0] != 12*time.Millisecond {
		t.Errorf("sleeps = %v, want [12ms]", got)
	}
}

func TestTypingRateCountsTimeAlreadyPassed(t *testing.T) {
	r, _, clock := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindKey, Chord: "a"}}, runOptions{})
	clock.t = clock.t.Add(time.Hour) // the agent thought for a while
	run(t, r, input.Batch{{Kind: input.KindKey, Chord: "b"}}, runOptions{})
	if got := clock.Sleeps(); len(got) != 0 {
		t.Errorf("sleeps = %v, want none: the interval had long passed", got)
	}
}

func TestNonUSTextGoesWholeThroughGuest(t *testing.T) {
	guest := &recordingGuest{}
	r, dev, _ := newTestRunner(t, guest)
	const text = "naïve café 日本語 🙂"
	run(t, r, input.Batch{{Kind: input.KindType, Text: text}}, runOptions{})
	if len(guest.texts) != 1 || guest.texts[0] != text {
		t.Errorf("guest got %q, want exactly [%q]", guest.texts, text)
	}
	if f := dev.Frames(); len(f) != 0 {
		t.Errorf("device got frames %s, want none", framesString(f))
	}
}

func TestNonUSTextWithoutGuestIsInvalidAndSendsNothing(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), input.Batch{{Kind: input.KindKey, Chord: "a"}, {Kind: input.KindType, Text: "café"}}, runOptions{Space: native})
	var ve *input.ValidationError
	if !errors.As(err, &ve) || ve.Field != "actions[1].text" {
		t.Fatalf("err = %v, want a validation error on actions[1].text", err)
	}
	if f := dev.Frames(); len(f) != 0 {
		t.Errorf("frames sent for an invalid batch: %s", framesString(f))
	}
}

func TestInvalidBatchSendsNothing(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), input.Batch{
		{Kind: input.KindClick, At: &input.Point{X: 1, Y: 1}},
		{Kind: input.KindKey, Chord: "ctrl+Entr"},
	}, runOptions{Space: native})
	if !errors.Is(err, input.ErrInvalid) {
		t.Fatalf("err = %v, want input.ErrInvalid", err)
	}
	var uk *input.UnknownKeyError
	if !errors.As(err, &uk) || !strings.Contains(err.Error(), "actions[1].chord") {
		t.Fatalf("err = %v, want an unknown key error on actions[1].chord", err)
	}
	if f := dev.Frames(); len(f) != 0 {
		t.Errorf("frames sent for an invalid batch: %s", framesString(f))
	}
}

func TestStopsAtFirstFailureAndReleasesEverything(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindMouseDown, At: &input.Point{X: 5, Y: 5}, Button: input.ButtonRight}}, runOptions{})
	dev.failOn = func(n int, ev []desktop.InputEvent) bool { return ev[0].Kind == desktop.InputKey && ev[0].Key == "b" }
	res, err := r.Run(context.Background(), input.Batch{
		{Kind: input.KindKey, Chord: "a"},
		{Kind: input.KindHoldKey, Keys: []string{"b"}, Duration: time.Second},
		{Kind: input.KindKey, Chord: "c"},
	}, runOptions{Space: native})
	if !errors.Is(err, errDeviceGone) || !strings.Contains(err.Error(), "action 1 (hold_key)") {
		t.Fatalf("err = %v, want the device error for action 1", err)
	}
	var statuses []input.ActionStatus
	for _, r := range res.Results {
		statuses = append(statuses, r.Status)
	}
	if want := []input.ActionStatus{input.StatusOK, input.StatusError, input.StatusSkipped}; !equalSlices(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	if res.Results[1].Error == "" {
		t.Error("the failed action has no error text")
	}
	frames := dev.Frames()
	assertFrames(t, frames[2:],
		tap("a"),
		[]desktop.InputEvent{key("b", true)},      // failed: it may have reached the guest
		[]desktop.InputEvent{btn("right", false)}, // held since the earlier batch
		[]desktop.InputEvent{key("b", false)},
	)
	if b, k := r.Held(); len(b) != 0 || len(k) != 0 {
		t.Errorf("still held after the failure: buttons %v keys %v", b, k)
	}
}

func TestHoldKeyReleasesWhenContextEnds(t *testing.T) {
	r, dev, clock := newTestRunner(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock.onSleep = func(d time.Duration) {
		if d == 3*time.Second {
			cancel() // the caller hangs up mid-hold
		}
	}
	_, err := r.Run(ctx, input.Batch{{Kind: input.KindHoldKey, Keys: []string{"shift", "a"}, Duration: 3 * time.Second}}, runOptions{Space: native})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{key("shift", true), key("a", true)},
		[]desktop.InputEvent{key("a", false), key("shift", false)},
	)
	if _, k := r.Held(); len(k) != 0 {
		t.Errorf("keys still held: %v", k)
	}
}

func TestModifiersReleasedWhenContextEndsMidClick(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev.block = func(bctx context.Context, ev []desktop.InputEvent) error {
		if ev[0].Kind == desktop.InputButton && ev[0].Down {
			cancel()
			return bctx.Err()
		}
		return nil
	}
	_, err := r.Run(ctx, input.Batch{{Kind: input.KindClick, At: &input.Point{X: 3, Y: 4}, Modifiers: []string{"alt"}}}, runOptions{Space: native})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	frames := dev.Frames()
	if len(frames) < 2 {
		t.Fatalf("frames:\n%s", framesString(frames))
	}
	// The press may have reached the guest: release it, then the modifier.
	assertFrames(t, frames[len(frames)-2:], []desktop.InputEvent{btn("left", false)}, []desktop.InputEvent{key("alt", false)})
	if b, k := r.Held(); len(b) != 0 || len(k) != 0 {
		t.Errorf("still held: buttons %v keys %v", b, k)
	}
}

func TestMouseDownUpAndCursorAcrossBatches(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindMouseDown, At: &input.Point{X: 5, Y: 6}}}, runOptions{})
	if b, _ := r.Held(); !equalSlices(b, []string{"left"}) {
		t.Fatalf("held buttons = %v, want [left]", b)
	}
	run(t, r, input.Batch{{Kind: input.KindMove, At: &input.Point{X: 50, Y: 60}}}, runOptions{})
	run(t, r, input.Batch{{Kind: input.KindMouseUp}}, runOptions{})
	res := run(t, r, input.Batch{{Kind: input.KindCursorPosition}}, runOptions{})
	if c := res.Results[0].Cursor; c == nil || *c != (input.Point{X: 50, Y: 60}) {
		t.Errorf("cursor = %v, want (50, 60)", c)
	}
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{mv(5, 6)}, []desktop.InputEvent{btn("left", true)},
		[]desktop.InputEvent{mv(50, 60)},
		[]desktop.InputEvent{btn("left", false)},
	)
	if b, _ := r.Held(); len(b) != 0 {
		t.Errorf("held buttons = %v after mouse_up", b)
	}
}

func TestCursorPositionUnknownIsAnError(t *testing.T) {
	r, _, _ := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), input.Batch{{Kind: input.KindCursorPosition}}, runOptions{Space: native})
	if err == nil || !strings.Contains(err.Error(), "not known") {
		t.Errorf("err = %v, want cursor position not known", err)
	}
	r.NotePointer(input.Point{X: 7, Y: 8})
	res := run(t, r, input.Batch{{Kind: input.KindCursorPosition}}, runOptions{})
	if c := res.Results[0].Cursor; c == nil || *c != (input.Point{X: 7, Y: 8}) {
		t.Errorf("cursor = %v after NotePointer(7, 8)", c)
	}
}

func TestScrollNotchesAreWheelPressReleasePairs(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindScroll, At: &input.Point{X: 100, Y: 200}, DY: -2, DX: 1}}, runOptions{})
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{mv(100, 200)},
		[]desktop.InputEvent{btn("wheel-up", true)}, []desktop.InputEvent{btn("wheel-up", false)},
		[]desktop.InputEvent{btn("wheel-up", true)}, []desktop.InputEvent{btn("wheel-up", false)},
		[]desktop.InputEvent{btn("wheel-right", true)}, []desktop.InputEvent{btn("wheel-right", false)},
	)
}

func TestDragPaths(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindDrag, Path: []input.Point{{X: 1, Y: 2}, {X: 3, Y: 4}, {X: 5, Y: 6}}}}, runOptions{})
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{mv(1, 2)}, []desktop.InputEvent{btn("left", true)},
		[]desktop.InputEvent{mv(3, 4)}, []desktop.InputEvent{mv(5, 6)},
		[]desktop.InputEvent{btn("left", false)},
	)

	r, dev, _ = newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindDrag, Path: []input.Point{{X: 9, Y: 9}}}}, runOptions{})
	assertFrames(t, dev.Frames(), // from wherever the pointer is
		[]desktop.InputEvent{btn("left", true)}, []desktop.InputEvent{mv(9, 9)}, []desktop.InputEvent{btn("left", false)},
	)
}

func TestKeyChordAndRepeat(t *testing.T) {
	r, dev, clock := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindKey, Chord: "ctrl+shift+t", Repeat: 3}}, runOptions{})
	assertFrames(t, dev.Frames(), tap("ctrl", "shift", "t"), tap("ctrl", "shift", "t"), tap("ctrl", "shift", "t"))
	if n := len(clock.Sleeps()); n != 2 {
		t.Errorf("%d sleeps, want 2 intervals between 3 keystrokes", n)
	}
}

func TestChordTooLongForThePS2QueueIsSplit(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindKey, Chord: "ctrl+alt+shift+super+Delete"}}, runOptions{})
	assertFrames(t, dev.Frames(),
		[]desktop.InputEvent{key("ctrl", true), key("alt", true), key("shift", true), key("meta_l", true), key("delete", true)},
		[]desktop.InputEvent{key("delete", false), key("meta_l", false), key("shift", false), key("alt", false), key("ctrl", false)},
	)
}

func TestWaitUsesTheRequestedDuration(t *testing.T) {
	r, dev, clock := newTestRunner(t, nil)
	run(t, r, input.Batch{{Kind: input.KindWait, Duration: 1500 * time.Millisecond}}, runOptions{})
	if got := clock.Sleeps(); len(got) != 1 || got[0] != 1500*time.Millisecond {
		t.Errorf("sleeps = %v, want [1.5s]", got)
	}
	if len(dev.Frames()) != 0 {
		t.Error("wait sent input")
	}
}

func TestTrailingScreenshotAndCaptureHook(t *testing.T) {
	r, _, _ := newTestRunner(t, nil)
	res := run(t, r, input.Batch{{Kind: input.KindMove, At: &input.Point{X: 1, Y: 1}}}, runOptions{})
	if res.Screenshot {
		t.Error("a move alone should not want a screenshot")
	}
	res = run(t, r, input.Batch{{Kind: input.KindMove, At: &input.Point{X: 1, Y: 1}}}, runOptions{Screenshot: true})
	if !res.Screenshot || res.Zoom != nil {
		t.Errorf("Screenshot option: got %+v", res)
	}

	var captured []int
	var regions []*input.Rect
	res = run(t, r, input.Batch{
		{Kind: input.KindScreenshot},
		{Kind: input.KindZoom, Region: &input.Rect{X1: 0, Y1: 0, X2: 10, Y2: 10}},
		{Kind: input.KindClick},
		{Kind: input.KindScreenshot},
	}, runOptions{Capture: func(ctx context.Context, i int, region *input.Rect) error {
		captured = append(captured, i)
		regions = append(regions, region)
		return nil
	}})
	if !equalSlices(captured, []int{0, 1}) {
		t.Errorf("captured %v, want the two mid-batch ones [0 1]", captured)
	}
	if regions[0] != nil || regions[1] == nil || *regions[1] != (input.Rect{X1: 0, Y1: 0, X2: 10, Y2: 10}) {
		t.Errorf("regions %v", regions)
	}
	if !res.Screenshot || res.Zoom != nil {
		t.Errorf("a batch ending in screenshot: got Screenshot=%v Zoom=%v", res.Screenshot, res.Zoom)
	}
	if r := res.Results[1].Region; r == nil || *r != (input.Rect{X1: 0, Y1: 0, X2: 10, Y2: 10}) {
		t.Errorf("zoom result region = %v", r)
	}
}

func TestBatchesRunOneAtATimeInArrivalOrder(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	dev.block = func(ctx context.Context, ev []desktop.InputEvent) error {
		if ev[0].Kind == desktop.InputMove && ev[0].X == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}
	done := make(chan int, 4)
	go func() {
		run(t, r, input.Batch{{Kind: input.KindMove, At: &input.Point{X: 1, Y: 0}}}, runOptions{})
		done <- 1
	}()
	<-started

	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r.queue.mu.Lock()
			got := len(r.queue.waiters)
			r.queue.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d batches queued, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := 2; i <= 3; i++ {
		go func() {
			run(t, r, input.Batch{{Kind: input.KindMove, At: &input.Point{X: i, Y: 0}}}, runOptions{})
			done <- i
		}()
		waitQueued(i - 1)
	}
	// A batch whose context ends while queued leaves without running.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, input.Batch{{Kind: input.KindMove, At: &input.Point{X: 4, Y: 0}}}, runOptions{Space: native})
		gaveUp <- err
	}()
	waitQueued(3)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued batch with ended context: err = %v", err)
	}
	waitQueued(2)
	close(release)
	for range 3 {
		<-done
	}
	assertFrames(t, dev.Frames(), []desktop.InputEvent{mv(1, 0)}, []desktop.InputEvent{mv(2, 0)}, []desktop.InputEvent{mv(3, 0)})
}

func TestGuestErrorFailsTheAction(t *testing.T) {
	guest := &recordingGuest{err: errors.New("agent not running")}
	r, _, _ := newTestRunner(t, guest)
	_, err := r.Run(context.Background(), input.Batch{{Kind: input.KindType, Text: "ü"}}, runOptions{Space: native})
	if err == nil || !strings.Contains(err.Error(), "type through the guest") {
		t.Errorf("err = %v, want the guest failure", err)
	}
}

func TestNewRunnerNeedsADevice(t *testing.T) {
	if _, err := newRunner(runnerConfig{}); err == nil {
		t.Error("newRunner without a device succeeded")
	}
	if _, err := newRunner(runnerConfig{Device: &recordingDevice{}, KeystrokeInterval: -1}); err == nil {
		t.Error("newRunner with a negative interval succeeded")
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSleepContext(t *testing.T) {
	if err := sleepContext(context.Background(), time.Millisecond); err != nil {
		t.Errorf("sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := sleepContext(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep with an ended context: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Error("sleep did not return when its context ended")
	}
}

func TestRealClockRun(t *testing.T) {
	dev := &recordingDevice{}
	r, err := newRunner(runnerConfig{Device: dev, KeystrokeInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), input.Batch{{Kind: input.KindType, Text: "hi"}}, runOptions{Space: native})
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed < time.Millisecond {
		t.Errorf("two paced keystrokes took %v, less than one interval", res.Elapsed)
	}
	assertFrames(t, dev.Frames(), tap("h"), tap("i"))
}

func TestRunnerValidateAndRelease(t *testing.T) {
	r, dev, _ := newTestRunner(t, nil)
	if err := r.Validate(input.Batch{{Kind: input.KindType, Text: "ü"}}, native); !errors.Is(err, input.ErrInvalid) {
		t.Errorf("Validate without a guest: %v", err)
	}
	if err := r.Validate(input.Batch{{Kind: input.KindType, Text: "u"}}, native); err != nil {
		t.Errorf("Validate: %v", err)
	}
	run(t, r, input.Batch{{Kind: input.KindMouseDown, Button: input.ButtonMiddle}}, runOptions{})
	if err := r.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertFrames(t, dev.Frames(), []desktop.InputEvent{btn("middle", true)}, []desktop.InputEvent{btn("middle", false)})
	if b, _ := r.Held(); len(b) != 0 {
		t.Errorf("held after Release: %v", b)
	}
}

func TestCaptureErrorFailsTheAction(t *testing.T) {
	r, _, _ := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), input.Batch{{Kind: input.KindScreenshot}, {Kind: input.KindWait}}, runOptions{
		Space:   native,
		Capture: func(context.Context, int, *input.Rect) error { return errors.New("no frame") },
	})
	if err == nil || !strings.Contains(err.Error(), "capture the screen: no frame") {
		t.Errorf("err = %v", err)
	}
}

// A modifier's release that a busy guest holds up past the release grace
// still belongs to the running request: it waits within the request's own
// deadline rather than failing the click with a deadline of its own.
func TestReleaseWhileTheRequestLivesWaitsOnItsDeadline(t *testing.T) {
	dev := &recordingDevice{}
	r, err := newRunner(runnerConfig{Device: dev, ReleaseTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan struct{})
	dev.block = func(ctx context.Context, ev []desktop.InputEvent) error {
		if ev[0].Kind == desktop.InputKey && !ev[0].Down {
			select {
			case <-slow: // the guest took the press at last
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, input.Batch{{Kind: input.KindClick, At: &input.Point{X: 3, Y: 4}, Modifiers: []string{"alt"}}}, runOptions{Space: native})
		done <- err
	}()
	// Longer than the release grace: the old timer had failed the click.
	select {
	case err := <-done:
		t.Fatalf("the click answered %v while its modifier's release was still held up", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(slow)
	if err := <-done; err != nil {
		t.Fatalf("click with alt on a slow guest: %v", err)
	}
	if _, keys := r.Held(); len(keys) != 0 {
		t.Errorf("keys still held: %v", keys)
	}
}
