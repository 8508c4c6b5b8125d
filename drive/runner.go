package drive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/input"
)

// DefaultKeystrokeInterval is the default typing rate: one keystroke every
// 5 ms, about 200 a second.
const DefaultKeystrokeInterval = 5 * time.Millisecond

// defaultReleaseTimeout bounds the frames that release held keys and buttons
// after the request's context has ended.
const defaultReleaseTimeout = 2 * time.Second

// runnerConfig configures a runner.
type runnerConfig struct {
	// Device sends low-level input to the desktop. Required.
	Device inputDevice
	// Guest types text the US layout cannot. Optional: without it such
	// text is a validation error.
	Guest guestTypist
	// Limits bound each batch; zero fields take input.DefaultLimits.
	Limits input.Limits
	// KeystrokeInterval is the typing rate, as the time from one keyboard
	// frame to the next (like xdotool's --delay); 0 selects
	// DefaultKeystrokeInterval. It paces all keyboard frames, across
	// actions and batches. It is a rate, not a wait for the guest: the
	// QEMU drivers also hold each keyboard frame until the guest has read
	// the last from its 16-byte PS/2 queue (qemuvm.KeyGate). It
	// also spaces the press and release of modifiers held around pointer
	// actions, which keeps them ordered around the pointer events: keyboard
	// and pointer are separate guest devices.
	KeystrokeInterval time.Duration
	// ReleaseTimeout bounds releasing held keys and buttons once the
	// request's context has ended; 0 selects defaultReleaseTimeout.
	ReleaseTimeout time.Duration
}

// guestTypist delivers text that the US keyboard layout cannot type
// (accents, CJK, emoji) from inside the guest, for example by pasting
// through the clipboard or with `xdotool type`; guestTyper implements it.
type guestTypist interface {
	// TypeText makes text appear at the focused widget exactly as given.
	TypeText(ctx context.Context, text string) error
}

// runner runs batches of actions on one desktop. It holds the desktop's
// pointer state (last position, held buttons and keys) so cursor_position and
// mouse_down/mouse_up work across batches. It runs one batch at a time:
// later batches queue in arrival order until their context ends. Safe for
// concurrent use.
type runner struct {
	dev            inputDevice
	guest          guestTypist
	limits         input.Limits
	interval       time.Duration
	releaseTimeout time.Duration

	// now and sleep are the clock; tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	queue fifo

	// lastKeyFrame is when the last keyboard frame went out; only the
	// queue's holder touches it.
	lastKeyFrame time.Time

	mu          sync.Mutex  // guards the pointer state below
	pos         input.Point // native
	posKnown    bool
	heldButtons []string // QEMU button names, in press order
	heldKeys    []string // qcodes, in press order
}

// newRunner returns a runner for one desktop.
func newRunner(cfg runnerConfig) (*runner, error) {
	if cfg.Device == nil {
		return nil, errors.New("new input runner: no device")
	}
	if cfg.KeystrokeInterval < 0 || cfg.ReleaseTimeout < 0 {
		return nil, errors.New("new input runner: negative interval or timeout")
	}
	r := &runner{
		dev:            cfg.Device,
		guest:          cfg.Guest,
		limits:         cfg.Limits, // input.Compile fills in the defaults
		interval:       cfg.KeystrokeInterval,
		releaseTimeout: cfg.ReleaseTimeout,
		now:            time.Now,
		sleep:          sleepContext,
	}
	if r.interval == 0 {
		r.interval = DefaultKeystrokeInterval
	}
	if r.releaseTimeout == 0 {
		r.releaseTimeout = defaultReleaseTimeout
	}
	return r, nil
}

// sleepContext waits d or until ctx ends. Used for agent-requested waits and
// holds and for pacing input (the typing rate, sleepUntil), never to wait
// for the guest.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runOptions are per batch.
type runOptions struct {
	// Space is the coordinate space the batch's coordinates are in, and
	// cursor_position reports in. Required: input.NativeSpace for native
	// pixels.
	Space input.Space
	// Screenshot asks for a trailing screenshot whatever the last action.
	Screenshot bool
	// Capture, if set, is called for screenshot and zoom actions that are
	// not the last of the batch (region is nil for a screenshot, native
	// for a zoom). The last one is left to the caller: see
	// input.BatchResult.Screenshot.
	Capture func(ctx context.Context, index int, region *input.Rect) error
	// Starting, if set, is called as each action starts, before any of its
	// frames is sent.
	Starting func(index int, kind input.Kind)
}

// Validate checks a batch as Run would, without sending or queueing.
func (r *runner) Validate(batch input.Batch, space input.Space) error {
	_, err := input.Compile(batch, r.validateOptions(space))
	return err
}

func (r *runner) validateOptions(space input.Space) input.ValidateOptions {
	return input.ValidateOptions{Space: space, Limits: r.limits, HasGuest: r.guest != nil}
}

// Run validates the whole batch, then runs its actions in order, stopping
// at the first failure. A batch that fails validation sends nothing and
// returns an *input.ValidationError (errors.Is(err, input.ErrInvalid)). A
// failed action returns the results so far, with the rest skipped, and an
// error naming the action; everything held (keys, and buttons, including
// those from an earlier mouse_down) is then released, even when ctx has
// ended.
func (r *runner) Run(ctx context.Context, batch input.Batch, opts runOptions) (input.BatchResult, error) {
	steps, err := input.Compile(batch, r.validateOptions(opts.Space))
	if err != nil {
		return input.BatchResult{}, err
	}
	queuedAt := r.now()
	if err := r.queue.lock(ctx); err != nil {
		return input.BatchResult{}, fmt.Errorf("wait for the desktop's earlier input batches: %w", err)
	}
	defer r.queue.unlock()
	start := r.now()

	res := input.BatchResult{Results: make([]input.ActionResult, len(steps)), Queued: start.Sub(queuedAt)}
	for i, s := range steps {
		res.Results[i] = input.ActionResult{Index: i, Kind: s.Action.Kind, Status: input.StatusSkipped}
	}
	last := steps[len(steps)-1]
	res.Screenshot = opts.Screenshot || last.Action.Kind == input.KindScreenshot || last.Action.Kind == input.KindZoom
	if last.Action.Kind == input.KindZoom {
		res.Zoom = last.Region
	}

	for i, s := range steps {
		t0 := r.now()
		out := &res.Results[i]
		err := ctx.Err()
		if err == nil {
			if opts.Starting != nil {
				opts.Starting(i, s.Action.Kind)
			}
			err = r.exec(ctx, i, i == len(steps)-1, s, opts, out)
		}
		out.Elapsed = r.now().Sub(t0)
		if err != nil {
			out.Status = input.StatusError
			out.Error = err.Error()
			if rerr := r.releaseAll(ctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
			res.Elapsed = r.now().Sub(start)
			return res, fmt.Errorf("action %d (%s): %w", i, s.Action.Kind, err)
		}
		out.Status = input.StatusOK
	}
	res.Elapsed = r.now().Sub(start)
	return res, nil
}

// Position returns the last pointer position sent or noted, in native
// pixels; ok is false before the first one.
func (r *runner) Position() (p input.Point, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos, r.posKnown
}

// NotePointer records a pointer position that reached the guest some other
// way, for example a person's viewer, so cursor_position stays true.
func (r *runner) NotePointer(p input.Point) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pos, r.posKnown = p, true
}

// Held returns the buttons (QEMU names) and keys (qcodes) the runner has
// pressed and not released.
func (r *runner) Held() (buttons, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heldButtons), slices.Clone(r.heldKeys)
}

// Release releases every held key and button, after the running batch, for
// example before a person takes over the desktop.
func (r *runner) Release(ctx context.Context) error {
	if err := r.queue.lock(ctx); err != nil {
		return fmt.Errorf("wait for the desktop's earlier input batches: %w", err)
	}
	defer r.queue.unlock()
	return r.releaseAll(ctx)
}

func (r *runner) exec(ctx context.Context, index int, last bool, s input.Step, opts runOptions, out *input.ActionResult) error {
	switch s.Action.Kind {
	case input.KindScreenshot:
		if !last && opts.Capture != nil {
			return r.capture(ctx, opts, index, nil)
		}
		return nil
	case input.KindZoom:
		out.Region = s.Region
		if !last && opts.Capture != nil {
			return r.capture(ctx, opts, index, s.Region)
		}
		return nil
	case input.KindCursorPosition:
		p, ok := r.Position()
		if !ok {
			return errors.New("cursor position is not known yet: no pointer action has reached this desktop")
		}
		x, y := opts.Space.FromNative(p.X, p.Y)
		out.Cursor = &input.Point{X: x, Y: y}
		return nil
	case input.KindMove:
		return r.withModifiers(ctx, s.Mods, func() error { return r.moveTo(ctx, s.At) })
	case input.KindClick:
		return r.withModifiers(ctx, s.Mods, func() error {
			if err := r.moveTo(ctx, s.At); err != nil {
				return err
			}
			for range s.Count {
				if err := r.button(ctx, s.Button, true); err != nil {
					return err
				}
				if err := r.button(ctx, s.Button, false); err != nil {
					return err
				}
			}
			return nil
		})
	case input.KindDrag:
		return r.withModifiers(ctx, s.Mods, func() error { return r.drag(ctx, s) })
	case input.KindMouseDown, input.KindMouseUp:
		if err := r.moveTo(ctx, s.At); err != nil {
			return err
		}
		return r.button(ctx, s.Button, s.Action.Kind == input.KindMouseDown)
	case input.KindScroll:
		return r.withModifiers(ctx, s.Mods, func() error {
			if err := r.moveTo(ctx, s.At); err != nil {
				return err
			}
			// A wheel notch is a press and a release of QEMU's wheel
			// button, each its own frame as for any button.
			for _, wheel := range s.Notches {
				if err := r.button(ctx, wheel, true); err != nil {
					return err
				}
				if err := r.button(ctx, wheel, false); err != nil {
					return err
				}
			}
			return nil
		})
	case input.KindType:
		if s.Text.Guest != "" {
			if err := r.guest.TypeText(ctx, s.Text.Guest); err != nil {
				return fmt.Errorf("type through the guest: %w", err)
			}
			return nil
		}
		for _, k := range s.Text.Strokes {
			if err := r.keystroke(ctx, k); err != nil {
				return err
			}
		}
		return nil
	case input.KindKey:
		for range s.Repeat {
			if err := r.keystroke(ctx, input.Keystroke(s.Chord)); err != nil {
				return err
			}
		}
		return nil
	case input.KindHoldKey:
		if err := r.keyFrame(ctx, keyEvents(s.Chord, true)); err != nil {
			return err
		}
		err := r.sleep(ctx, s.Action.Duration)
		return errors.Join(err, r.releaseKeys(ctx, s.Chord))
	case input.KindWait:
		return r.sleep(ctx, s.Action.Duration)
	}
	return fmt.Errorf("action %q has no runner", s.Action.Kind)
}

func (r *runner) capture(ctx context.Context, opts runOptions, index int, region *input.Rect) error {
	if err := opts.Capture(ctx, index, region); err != nil {
		return fmt.Errorf("capture the screen: %w", err)
	}
	return nil
}
