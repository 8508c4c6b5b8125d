package drive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// recordingDevice is a fake inputDevice that records every frame.
type recordingDevice struct {
	mu     sync.Mutex
	frames [][]desktop.InputEvent
	// failOn, if set, makes Send fail for a frame it returns true for
	// (the frame is still recorded).
	failOn func(n int, events []desktop.InputEvent) bool
	// block, if set, is called before recording; tests use it to hold a
	// batch in flight.
	block func(ctx context.Context, events []desktop.InputEvent) error
}

var errDeviceGone = errors.New("device gone")

func (d *recordingDevice) Send(ctx context.Context, events []desktop.InputEvent) error {
	if d.block != nil {
		if err := d.block(ctx, events); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frames = append(d.frames, append([]desktop.InputEvent(nil), events...))
	if d.failOn != nil && d.failOn(len(d.frames), events) {
		return errDeviceGone
	}
	return nil
}

func (d *recordingDevice) Frames() [][]desktop.InputEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]desktop.InputEvent(nil), d.frames...)
}

// recordingGuest is a fake guestTypist.
type recordingGuest struct {
	mu    sync.Mutex
	texts []string
	err   error
}

func (g *recordingGuest) TypeText(ctx context.Context, text string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.texts = append(g.texts, text)
	return g.err
}

// fakeClock is a clock whose sleeps return at once, advancing it and
// recording how long they would have waited.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
	// onSleep, if set, runs before a sleep returns (tests cancel
	// contexts from it).
	onSleep func(d time.Duration)
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	hook := c.onSleep
	c.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// newTestRunner returns a runner on a recording device and a fake clock.
func newTestRunner(t *testing.T, guest guestTypist) (*runner, *recordingDevice, *fakeClock) {
	t.Helper()
	dev := &recordingDevice{}
	cfg := runnerConfig{Device: dev}
	if guest != nil {
		cfg.Guest = guest
	}
	r, err := newRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.now, r.sleep = clock.now, clock.sleep
	return r, dev, clock
}

// scaleSpace is a test Space whose pixels are factor native pixels wide.
type scaleSpace struct{ w, h, factor int }

func (s scaleSpace) Size() (int, int)               { return s.w, s.h }
func (s scaleSpace) ToNative(x, y int) (int, int)   { return x * s.factor, y * s.factor }
func (s scaleSpace) FromNative(x, y int) (int, int) { return x / s.factor, y / s.factor }

// Short constructors for expected frames.
func mv(x, y int) desktop.InputEvent { return desktop.InputEvent{Kind: desktop.InputMove, X: x, Y: y} }
func btn(b string, d bool) desktop.InputEvent {
	return desktop.InputEvent{Kind: desktop.InputButton, Button: b, Down: d}
}
func key(q string, d bool) desktop.InputEvent {
	return desktop.InputEvent{Kind: desktop.InputKey, Key: q, Down: d}
}

// tap is the one-frame keystroke of qcodes pressed in order and released in
// reverse.
func tap(qcodes ...string) []desktop.InputEvent {
	var ev []desktop.InputEvent
	for _, q := range qcodes {
		ev = append(ev, key(q, true))
	}
	for i := len(qcodes) - 1; i >= 0; i-- {
		ev = append(ev, key(qcodes[i], false))
	}
	return ev
}

func framesString(frames [][]desktop.InputEvent) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString("[")
		for i, e := range f {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(eventString(e))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func eventString(e desktop.InputEvent) string {
	dir := "up"
	if e.Down {
		dir = "down"
	}
	switch e.Kind {
	case desktop.InputMove:
		return fmt.Sprintf("move(%d,%d)", e.X, e.Y)
	case desktop.InputButton:
		return e.Button + "-" + dir
	case desktop.InputKey:
		return e.Key + "-" + dir
	}
	return "?"
}

func assertFrames(t *testing.T, got [][]desktop.InputEvent, want ...[]desktop.InputEvent) {
	t.Helper()
	if g, w := framesString(got), framesString(want); g != w {
		t.Errorf("frames:\n got:\n%s want:\n%s", g, w)
	}
}
