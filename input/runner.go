package input

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// DefaultKeystrokeInterval is the default typing rate: one keystroke every
// 5 ms, about 200 a second.
const DefaultKeystrokeInterval = 5 * time.Millisecond

// DefaultReleaseTimeout bounds the frames that release held keys and buttons
// after the request's context has ended.
const DefaultReleaseTimeout = 2 * time.Second

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Device sends low-level input to the desktop. Required.
	Device Device
	// Guest types text the US layout cannot. Optional: without it such
	// text is a validation error.
	Guest Guest
	// Limits bound each batch; zero fields take DefaultLimits.
	Limits Limits
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
	// request's context has ended; 0 selects DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
}

// Runner runs batches of actions on one desktop. It holds the desktop's
// pointer state (last position, held buttons and keys) so cursor_position and
// mouse_down/mouse_up work across batches. It runs one batch at a time:
// later batches queue in arrival order until their context ends. Safe for
// concurrent use.
type Runner struct {
	dev            Device
	guest          Guest
	limits         Limits
	interval       time.Duration
	releaseTimeout time.Duration

	// now and sleep are the clock; tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	queue fifo

	// lastKeyFrame is when the last keyboard frame went out; only the
	// queue's holder touches it.
	lastKeyFrame time.Time

	mu          sync.Mutex // guards the pointer state below
	pos         Point      // native
	posKnown    bool
	heldButtons []string // QEMU button names, in press order
	heldKeys    []string // qcodes, in press order
}

// NewRunner returns a Runner for one desktop.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.Device == nil {
		return nil, errors.New("new input runner: no device")
	}
	if cfg.KeystrokeInterval < 0 || cfg.ReleaseTimeout < 0 {
		return nil, errors.New("new input runner: negative interval or timeout")
	}
	r := &Runner{
		dev:            cfg.Device,
		guest:          cfg.Guest,
		limits:         cfg.Limits.withDefaults(),
		interval:       cfg.KeystrokeInterval,
		releaseTimeout: cfg.ReleaseTimeout,
		now:            time.Now,
		sleep:          sleepContext,
	}
	if r.interval == 0 {
		r.interval = DefaultKeystrokeInterval
	}
	if r.releaseTimeout == 0 {
		r.releaseTimeout = DefaultReleaseTimeout
	}
	return r, nil
}

// sleepContext waits d or until ctx ends. Used for agent-requested waits and
// holds and for the typing rate, nothing else.
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

// RunOptions are per batch.
type RunOptions struct {
	// Space is the coordinate space the batch's coordinates are in, and
	// cursor_position reports in. Required: NativeSpace for native pixels.
	Space Space
	// Screenshot asks for a trailing screenshot whatever the last action.
	Screenshot bool
	// Capture, if set, is called for screenshot and zoom actions that are
	// not the last of the batch (region is nil for a screenshot, native
	// for a zoom). The last one is left to the caller: see
	// BatchResult.Screenshot.
	Capture func(ctx context.Context, index int, region *Rect) error
	// Starting, if set, is called as each action starts, before any of its
	// frames is sent.
	Starting func(index int, kind Kind)
}

// ActionStatus is how an action of a batch ended.
type ActionStatus string

// Action statuses.
const (
	StatusOK      ActionStatus = "ok"
	StatusError   ActionStatus = "error"
	StatusSkipped ActionStatus = "skipped" // after an earlier failure
)

// ActionResult reports one action of a batch.
type ActionResult struct {
	Index   int
	Kind    Kind
	Status  ActionStatus
	Error   string
	Elapsed time.Duration
	// Cursor is the pointer position a cursor_position action found, in
	// the batch's space.
	Cursor *Point
	// Region is a zoom action's region in native pixels.
	Region *Rect
}

// BatchResult reports a batch.
type BatchResult struct {
	// Results has one entry per action of the batch, in order.
	Results []ActionResult
	// Screenshot says the caller should wait for the screen to settle and
	// capture it: RunOptions.Screenshot was set or the last action is a
	// screenshot or zoom.
	Screenshot bool
	// Zoom, when the last action is a zoom, is the native region to
	// capture instead of the whole screen.
	Zoom *Rect
	// Queued is how long the batch waited behind earlier batches.
	Queued time.Duration
	// Elapsed is how long the batch ran, after queueing.
	Elapsed time.Duration
}

// Validate checks a batch as Run would, without sending or queueing.
func (r *Runner) Validate(batch Batch, space Space) error {
	_, err := compile(batch, r.validateOptions(space))
	return err
}

func (r *Runner) validateOptions(space Space) ValidateOptions {
	return ValidateOptions{Space: space, Limits: r.limits, HasGuest: r.guest != nil}
}

// Run validates the whole batch, then runs its actions in order, stopping at
// the first failure. A batch that fails validation sends nothing and returns
// a *ValidationError (errors.Is(err, ErrInvalid)). A failed action returns
// the results so far, with the rest skipped, and an error naming the action;
// everything held (keys, and buttons, including those from an earlier
// mouse_down) is then released, even when ctx has ended.
func (r *Runner) Run(ctx context.Context, batch Batch, opts RunOptions) (BatchResult, error) {
	steps, err := compile(batch, r.validateOptions(opts.Space))
	if err != nil {
		return BatchResult{}, err
	}
	queuedAt := r.now()
	if err := r.queue.lock(ctx); err != nil {
		return BatchResult{}, fmt.Errorf("wait for the desktop's earlier input batches: %w", err)
	}
	defer r.queue.unlock()
	start := r.now()

	res := BatchResult{Results: make([]ActionResult, len(steps)), Queued: start.Sub(queuedAt)}
	for i, s := range steps {
		res.Results[i] = ActionResult{Index: i, Kind: s.action.Kind, Status: StatusSkipped}
	}
	last := steps[len(steps)-1]
	res.Screenshot = opts.Screenshot || last.action.Kind == KindScreenshot || last.action.Kind == KindZoom
	if last.action.Kind == KindZoom {
		res.Zoom = last.region
	}

	for i, s := range steps {
		t0 := r.now()
		out := &res.Results[i]
		err := ctx.Err()
		if err == nil {
			if opts.Starting != nil {
				opts.Starting(i, s.action.Kind)
			}
			err = r.exec(ctx, i, i == len(steps)-1, s, opts, out)
		}
		out.Elapsed = r.now().Sub(t0)
		if err != nil {
			out.Status = StatusError
			out.Error = err.Error()
			if rerr := r.releaseAll(ctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
			res.Elapsed = r.now().Sub(start)
			return res, fmt.Errorf("action %d (%s): %w", i, s.action.Kind, err)
		}
		out.Status = StatusOK
	}
	res.Elapsed = r.now().Sub(start)
	return res, nil
}

// Position returns the last pointer position sent or noted, in native
// pixels; ok is false before the first one.
func (r *Runner) Position() (p Point, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos, r.posKnown
}

// NotePointer records a pointer position that reached the guest some other
// way, for example a person's viewer, so cursor_position stays true.
func (r *Runner) NotePointer(p Point) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pos, r.posKnown = p, true
}

// Held returns the buttons (QEMU names) and keys (qcodes) the runner has
// pressed and not released.
func (r *Runner) Held() (buttons, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heldButtons), slices.Clone(r.heldKeys)
}

// Release releases every held key and button, after the running batch, for
// example before a person takes over the desktop.
func (r *Runner) Release(ctx context.Context) error {
	if err := r.queue.lock(ctx); err != nil {
		return fmt.Errorf("wait for the desktop's earlier input batches: %w", err)
	}
	defer r.queue.unlock()
	return r.releaseAll(ctx)
}

func (r *Runner) exec(ctx context.Context, index int, last bool, s step, opts RunOptions, out *ActionResult) error {
	switch s.action.Kind {
	case KindScreenshot:
		if !last && opts.Capture != nil {
			return r.capture(ctx, opts, index, nil)
		}
		return nil
	case KindZoom:
		out.Region = s.region
		if !last && opts.Capture != nil {
			return r.capture(ctx, opts, index, s.region)
		}
		return nil
	case KindCursorPosition:
		p, ok := r.Position()
		if !ok {
			return errors.New("cursor position is not known yet: no pointer action has reached this desktop")
		}
		x, y := opts.Space.FromNative(p.X, p.Y)
		out.Cursor = &Point{X: x, Y: y}
		return nil
	case KindMove:
		return r.withModifiers(ctx, s.mods, func() error { return r.moveTo(ctx, s.at) })
	case KindClick:
		return r.withModifiers(ctx, s.mods, func() error {
			if err := r.moveTo(ctx, s.at); err != nil {
				return err
			}
			for range s.count {
				if err := r.button(ctx, s.button, true); err != nil {
					return err
				}
				if err := r.button(ctx, s.button, false); err != nil {
					return err
				}
			}
			return nil
		})
	case KindDrag:
		return r.withModifiers(ctx, s.mods, func() error { return r.drag(ctx, s) })
	case KindMouseDown, KindMouseUp:
		if err := r.moveTo(ctx, s.at); err != nil {
			return err
		}
		return r.button(ctx, s.button, s.action.Kind == KindMouseDown)
	case KindScroll:
		return r.withModifiers(ctx, s.mods, func() error {
			if err := r.moveTo(ctx, s.at); err != nil {
				return err
			}
			// A wheel notch is a press and a release of QEMU's wheel
			// button, each its own frame as for any button.
			for _, wheel := range s.notches {
				if err := r.button(ctx, wheel, true); err != nil {
					return err
				}
				if err := r.button(ctx, wheel, false); err != nil {
					return err
				}
			}
			return nil
		})
	case KindType:
		if s.text.guest != "" {
			if err := r.guest.TypeText(ctx, s.text.guest); err != nil {
				return fmt.Errorf("type through the guest: %w", err)
			}
			return nil
		}
		for _, k := range s.text.strokes {
			if err := r.keystroke(ctx, k); err != nil {
				return err
			}
		}
		return nil
	case KindKey:
		for range s.repeat {
			if err := r.keystroke(ctx, keystroke(s.chord)); err != nil {
				return err
			}
		}
		return nil
	case KindHoldKey:
		if err := r.keyFrame(ctx, keyEvents(s.chord, true)); err != nil {
			return err
		}
		err := r.sleep(ctx, s.action.Duration)
		return errors.Join(err, r.releaseKeys(ctx, s.chord))
	case KindWait:
		return r.sleep(ctx, s.action.Duration)
	}
	return fmt.Errorf("action %q has no runner", s.action.Kind)
}

func (r *Runner) capture(ctx context.Context, opts RunOptions, index int, region *Rect) error {
	if err := opts.Capture(ctx, index, region); err != nil {
		return fmt.Errorf("capture the screen: %w", err)
	}
	return nil
}

// withModifiers holds mods down around body and always releases them.
func (r *Runner) withModifiers(ctx context.Context, mods Chord, body func() error) error {
	if len(mods) == 0 {
		return body()
	}
	if err := r.keyFrame(ctx, keyEvents(mods, true)); err != nil {
		return err
	}
	err := body()
	if err != nil {
		// Let go of the pointer before the modifiers, as a hand would.
		err = errors.Join(err, r.releaseButtons(ctx))
	}
	return errors.Join(err, r.releaseKeys(ctx, mods))
}

// releaseButtons releases held pointer buttons, even after ctx has ended.
func (r *Runner) releaseButtons(ctx context.Context) error {
	buttons, _ := r.Held()
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	var errs []error
	for _, b := range slices.Backward(buttons) {
		errs = append(errs, r.send(rctx, []desktop.InputEvent{{Kind: desktop.InputButton, Button: b, Down: false}}))
	}
	return errors.Join(errs...)
}

// releaseKeys releases keys in reverse order, even after ctx has ended.
func (r *Runner) releaseKeys(ctx context.Context, keys Chord) error {
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	return r.keyFrame(rctx, keyEvents(reversed(keys), false))
}

func (r *Runner) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.releaseTimeout)
}

// releaseAll releases every held key and button, even after ctx has ended.
func (r *Runner) releaseAll(ctx context.Context) error {
	buttons, keys := r.Held()
	if len(buttons) == 0 && len(keys) == 0 {
		return nil
	}
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	var errs []error
	if err := r.releaseButtons(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(keys) > 0 {
		if err := r.keyFrame(rctx, keyEvents(reversed(keys), false)); err != nil {
			errs = append(errs, err)
		}
	}
	// Whatever happened, forget the state: a failed release is reported,
	// and retrying it forever would wedge every later batch.
	r.mu.Lock()
	r.heldButtons, r.heldKeys = nil, nil
	r.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("release held input: %w", errors.Join(errs...))
	}
	return nil
}

func (r *Runner) moveTo(ctx context.Context, at *Point) error {
	if at == nil {
		return nil
	}
	return r.send(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: at.X, Y: at.Y}})
}

func (r *Runner) button(ctx context.Context, button string, down bool) error {
	return r.send(ctx, []desktop.InputEvent{{Kind: desktop.InputButton, Button: button, Down: down}})
}

func (r *Runner) drag(ctx context.Context, s step) error {
	path := s.path
	if len(path) > 1 {
		if err := r.moveTo(ctx, &path[0]); err != nil {
			return err
		}
		path = path[1:]
	}
	if err := r.button(ctx, s.button, true); err != nil {
		return err
	}
	for i := range path {
		if err := r.moveTo(ctx, &path[i]); err != nil {
			return err
		}
	}
	return r.button(ctx, s.button, false)
}

// keystroke presses and releases k: in one frame when it fits QEMU's PS/2
// queue, else as a press frame and a release frame.
func (r *Runner) keystroke(ctx context.Context, k keystroke) error {
	if k.fitsOneFrame() {
		return r.keyFrame(ctx, append(keyEvents(Chord(k), true), keyEvents(reversed(Chord(k)), false)...))
	}
	if err := r.keyFrame(ctx, keyEvents(Chord(k), true)); err != nil {
		return err
	}
	return r.releaseKeys(ctx, Chord(k))
}

// keyFrame sends a keyboard frame no sooner than KeystrokeInterval after the
// previous one: the typing rate.
func (r *Runner) keyFrame(ctx context.Context, events []desktop.InputEvent) error {
	if !r.lastKeyFrame.IsZero() {
		if wait := r.lastKeyFrame.Add(r.interval).Sub(r.now()); wait > 0 {
			if err := r.sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	err := r.send(ctx, events)
	r.lastKeyFrame = r.now()
	return err
}

// send sends one frame and tracks what it leaves held. When Send fails we
// cannot know what reached the guest, so presses count as held (to be
// released) and releases as not done.
func (r *Runner) send(ctx context.Context, events []desktop.InputEvent) error {
	err := r.dev.Send(ctx, events)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		switch e.Kind {
		case desktop.InputKey:
			r.heldKeys = track(r.heldKeys, e.Key, e.Down, err == nil)
		case desktop.InputButton:
			r.heldButtons = track(r.heldButtons, e.Button, e.Down, err == nil)
		case desktop.InputMove:
			r.pos, r.posKnown = Point{X: e.X, Y: e.Y}, err == nil
		}
	}
	if err != nil {
		return fmt.Errorf("send input: %w", err)
	}
	return nil
}

func track(held []string, name string, down, sent bool) []string {
	i := slices.Index(held, name)
	switch {
	case down && i < 0:
		return append(held, name)
	case !down && sent && i >= 0:
		return slices.Delete(held, i, i+1)
	}
	return held
}

func keyEvents(keys []string, down bool) []desktop.InputEvent {
	events := make([]desktop.InputEvent, len(keys))
	for i, k := range keys {
		events[i] = desktop.InputEvent{Kind: desktop.InputKey, Key: k, Down: down}
	}
	return events
}

func reversed(keys []string) []string {
	out := slices.Clone(keys)
	slices.Reverse(out)
	return out
}
