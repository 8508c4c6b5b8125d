package drive

import (
	"context"
	"fmt"
	"image"
	"math"
	"slices"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// Bounds and defaults of a batch's picture.
const (
	// MaxSettle bounds a batch's quiet period.
	MaxSettle = 10 * time.Second
	// MaxSettleTimeout bounds the wait for a quiet screen.
	MaxSettleTimeout = time.Minute
	// DefaultSettleTimeout is that wait's default bound.
	DefaultSettleTimeout = 5 * time.Second
	// DefaultReaction bounds the wait for the screen's first reaction to a
	// batch's input before its quiet period is timed; MaxReaction bounds
	// what a request may ask.
	DefaultReaction = time.Second
	MaxReaction     = 10 * time.Second
)

// A Bound is the range of one of a request's durations, which every door
// takes in milliseconds: one table, so the doors and the service check
// the same range and say it the same way.
type Bound struct {
	Field string // the field on the wire ("settle_ms")
	Max   time.Duration
	Zero  string // what 0 means, for the error
}

// The bounds of a batch's picture.
var (
	SettleBound        = Bound{"settle_ms", MaxSettle, "0 (capture at once)"}
	SettleTimeoutBound = Bound{"timeout_ms", MaxSettleTimeout, "0"}
	ReactionBound      = Bound{"reaction_ms", MaxReaction, "0 (do not wait for a reaction)"}
)

// Millis converts a count of milliseconds, checked before the conversion
// so that no count wraps around.
func (b Bound) Millis(ms int64) (time.Duration, error) {
	if ms < 0 || ms > b.Max.Milliseconds() {
		return 0, b.outside(ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Check checks a duration already converted.
func (b Bound) Check(d time.Duration) error {
	if d < 0 || d > b.Max {
		return b.outside(d.Milliseconds())
	}
	return nil
}

func (b Bound) outside(ms int64) error {
	return fieldError(b.Field, "%d: use %s to %d", ms, b.Zero, b.Max.Milliseconds())
}

// Request is a batch to run and how to picture its end.
type Request struct {
	Batch input.Batch
	// Display is the declared coordinate space of the batch and its
	// pictures (a model's scaled screenshot); zero means native pixels.
	Display image.Point
	// NoUpscale refuses a Display larger than the screen (the answer's
	// picture would be upscaled: hundreds of MiB for nothing): set for
	// every token but the daemon's.
	NoUpscale bool
	// Screenshot asks for a trailing screenshot whatever the last action.
	Screenshot bool
	// Settle is how long the screen must stay unchanged before the
	// trailing screenshot (0 captures at once); SettleTimeout bounds that
	// wait (0 captures at once too).
	Settle        time.Duration
	SettleTimeout time.Duration
	// Reaction bounds the wait, before the quiet period, for the screen to
	// react to the batch's input (see Run); 0 does not wait for it.
	Reaction time.Duration
	Format   screenshot.Format
	Quality  int
	// Cursor draws the pointer into pictures when the display sends it
	// apart from the framebuffer.
	Cursor bool
	// MidShots captures screenshot and zoom actions that are not last.
	MidShots bool
}

// NewRequest is a request for batch with the defaults every front door
// starts from: PNG, settled for screenshot.DefaultQuiet within
// DefaultSettleTimeout.
func NewRequest(batch input.Batch) Request {
	return Request{
		Batch: batch, Settle: screenshot.DefaultQuiet, SettleTimeout: DefaultSettleTimeout, Reaction: DefaultReaction,
		Format: screenshot.PNG,
	}
}

// Picture is a captured screen and, when it waited for one, how the wait
// for a quiet screen ended.
type Picture struct {
	Shot   screenshot.Shot
	Settle *screenshot.Settle
	// Reacted says whether the screen reacted to the batch's input before
	// the quiet period was timed; nil when there was no input or no wait.
	Reacted *bool
	// ReactionWait is how long that took.
	ReactionWait time.Duration
	// NoReaction: the reaction wait ran out with the screen not reacting
	// and the guest not seen idle, so the input's effect may come later.
	NoReaction bool
}

// Notes are what the batch could not confirm: its warnings, then the
// trailing picture's caveat. Every door shows them to its reader (the
// canonical warnings, Anthropic's Note blocks, Gemini's response, OpenAI's
// header).
func (o Outcome) Notes() []string {
	if o.Picture == nil {
		return o.Warnings
	}
	if c := o.Picture.Caveat(); c != "" {
		return append(slices.Clip(o.Warnings), c)
	}
	return o.Warnings
}

// Caveat says, in a sentence for the model or person reading the result,
// why the picture may not show the batch's effect yet: the screen was
// still changing when the settle wait ran out, or it showed no reaction to
// the input within the reaction bound while the guest was still busy.
// Empty when the picture can be trusted as the input's outcome.
func (p Picture) Caveat() string {
	switch {
	case p.Settle != nil && !p.Settle.Settled:
		return fmt.Sprintf("the screen was still changing when this screenshot was taken (after waiting %d ms for it to settle): take another screenshot before relying on it",
			(p.Settle.Waited + p.ReactionWait).Milliseconds())
	case p.NoReaction:
		return fmt.Sprintf("the screen showed no reaction to the input within %d ms (the desktop may be busy): its effect may appear later, so take another screenshot to check before repeating the action",
			p.ReactionWait.Milliseconds())
	}
	return ""
}

// Settled says whether the picture waited for a quiet screen and got one
// that shows the input's outcome (no Caveat).
func (p Picture) Settled() bool {
	return p.Settle != nil && p.Caveat() == ""
}

// Outcome is what a batch did.
type Outcome struct {
	Result input.BatchResult
	// Space is the batch's coordinate space.
	Space input.Space
	// Err is the batch's failure; Result still reports every action.
	Err error
	// Picture is the trailing screenshot, when one was wanted and taken.
	Picture *Picture
	// Mids are the pictures of screenshot and zoom actions that are not
	// last, by action index (Request.MidShots).
	Mids map[int]Picture
	// SyncWait is how long the batch waited for the guest to take input
	// before sending more (keys after a click, a drag's press).
	SyncWait time.Duration
	// Warnings say what the batch could not confirm, such as keys sent
	// after a click the guest was not seen to take.
	Warnings []string
}

// Run runs a batch of actions on a desktop: it checks that the desktop
// runs and no person holds it, validates the whole batch (nothing is sent
// when that fails), queues behind the desktop's earlier batches, sends the
// actions, then, if a picture is wanted, waits for the screen to react to
// the input (a change beyond the pointer's own redraw, or any change after
// a bare move; at most Request.Reaction), then for it to settle, and
// captures it. Keys never overtake a click: see device.sealPointer. The
// returned error is a failure before anything ran; a failure of the batch
// itself is Outcome.Err.
func (s *Service) Run(ctx context.Context, id string, req Request) (Outcome, error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	if err := req.check(); err != nil {
		return Outcome{}, err
	}
	d, err := s.mgr.Get(id)
	if err != nil {
		return Outcome{}, err
	}
	if err := d.InputAllowed(); err != nil {
		return Outcome{}, err
	}
	dk, err := s.desk(id)
	if err != nil {
		return Outcome{}, err
	}
	native, err := s.ScreenSize(id)
	if err != nil {
		return Outcome{}, err
	}
	if req.NoUpscale && (req.Display.X > native.X || req.Display.Y > native.Y) {
		return Outcome{}, fieldError("display_width", "%dx%d is larger than the %dx%d screen: declare the screen's size or less (only the daemon's token may ask for an upscaled picture)", req.Display.X, req.Display.Y, native.X, native.Y)
	}
	out := Outcome{Space: spaceOf(native, req.Display)}
	rn := dk.runner
	if err := rn.Validate(req.Batch, out.Space); err != nil {
		return out, asInvalid(err)
	}
	last := req.Batch[len(req.Batch)-1].Kind
	var scr Screen
	if req.Screenshot || last == input.KindScreenshot || last == input.KindZoom || (req.MidShots && hasShot(req.Batch)) {
		if scr, err = s.readyScreen(ctx, id); err != nil {
			return out, err
		}
	}
	if hasKind(req.Batch, input.KindCursorPosition) {
		if _, ok := rn.Position(); !ok {
			// Best effort: without it cursor_position reports its own
			// error, which is what the agent should see then.
			if err := s.LocatePointer(ctx, id); err != nil {
				s.log.Debug("locate pointer", "desktop", id, "err", err)
			}
		}
	}
	opts := runOptions{Space: out.Space, Screenshot: req.Screenshot}
	if req.MidShots && scr != nil {
		out.Mids = map[int]Picture{}
		opts.Capture = func(ctx context.Context, index int, region *input.Rect) error {
			pic, err := s.settleAndCapture(ctx, rn, scr, req, out.Space, region)
			if err != nil {
				return err
			}
			out.Mids[index] = pic
			return nil
		}
	}
	bctx, blog := withBatchLog(ctx)
	opts.Starting = func(_ int, kind input.Kind) { blog.starting(kind) }
	out.Result, out.Err = rn.Run(bctx, req.Batch, opts)
	out.Err = asInvalid(out.Err)
	blog.mu.Lock()
	out.SyncWait, out.Warnings = blog.sync, blog.warnings
	react := blog.input && req.Reaction > 0
	since, bareMove := blog.counter, blog.bareMove
	blog.mu.Unlock()
	s.mgr.Events().Announce(id, desktop.EventAction, summarize(req.Batch, out.Err))
	if out.Err != nil || !out.Result.Screenshot {
		return out, nil
	}
	var r reaction
	react = react && req.Settle > 0 && req.SettleTimeout > 0
	if react && s.cfg.Pressure != nil {
		stretched := reactionFor(req.Reaction, s.cfg.Pressure())
		// The reaction's wait comes out of the settle's bound: a default
		// bound grows by the stretch, so the settle keeps its time.
		if req.SettleTimeout == DefaultSettleTimeout {
			req.SettleTimeout += stretched - req.Reaction
		}
		req.Reaction = stretched
	}
	if react {
		var err error
		if r, err = waitReaction(ctx, scr, s.cpuMeter(ctx, id), since, min(req.Reaction, req.SettleTimeout), req.Settle, bareMove); err != nil {
			out.Err = fmt.Errorf("trailing screenshot: wait for the screen to react: %w", err)
			return out, nil
		}
		req.SettleTimeout -= r.waited
	}
	settled := req
	if r.idle {
		settled.Settle = 0 // quiet for settle_ms already
	}
	pic, err := s.settleAndCapture(ctx, rn, scr, settled, out.Space, out.Result.Zoom)
	if err != nil {
		out.Err = fmt.Errorf("trailing screenshot: %w", err)
		return out, nil
	}
	if react {
		pic.Reacted, pic.ReactionWait = &r.reacted, r.waited
		pic.NoReaction = !r.reacted && !r.idle
		if r.idle {
			pic.Settle = &screenshot.Settle{Settled: true, Counter: r.counter, Changes: r.changes}
		}
	}
	out.Picture = &pic
	return out, nil
}

// maxReactionStretch bounds how far a busy host stretches the default
// reaction bound.
const maxReactionStretch = 4

// reactionFor is the reaction bound of a batch that asked for asked on a
// host whose CPU pressure is pressure: the default is stretched by
// 1/(1-pressure), at most maxReactionStretch times (2 s at 0.5, 4 s from
// 0.75), since a guest sharing contended CPUs reacts later and its picture
// should wait for the reaction rather than come early and false. A bound
// the request chose is kept. The wait still ends early once the guest has
// taken the input and gone idle.
func reactionFor(asked time.Duration, pressure float64) time.Duration {
	if asked != DefaultReaction || !(pressure > 0) {
		return asked
	}
	stretch := 1 / max(1-pressure, 1.0/maxReactionStretch)
	return time.Duration(float64(asked) * stretch)
}

// reaction is how the wait for the screen to react to input ended.
type reaction struct {
	// reacted: the screen changed beyond the pointer's own redraw (any
	// change after a bare move).
	reacted bool
	// idle: it did not, but the guest took the input (the screen changed)
	// and then stayed quiet, its CPUs idle, for the quiet period: nothing
	// more is coming.
	idle             bool
	waited           time.Duration
	counter, changes uint64
}

// waitReaction waits, at most bound, for the screen's reaction to input
// sent when the change counter was since. It ends early when the guest has
// visibly taken the input (the pointer redrawn) and then the screen stays
// quiet and the guest's CPUs idle (cpu) for quiet: so an action that
// changes nothing (a click in an already-focused terminal) costs what the
// quiet period did before, while a guest still working on the input (a
// menu openbox draws a second late right after a restore) is waited for.
func waitReaction(ctx context.Context, scr Screen, cpu *cpuMeter, since uint64, bound, quiet time.Duration, bareMove bool) (reaction, error) {
	start := time.Now()
	deadline := start.Add(bound)
	src := scr.Source()
	var last time.Time // when the screen last changed after since
	seen := since
	for {
		counter, _ := src.Changed()
		if counter > since {
			rects, ok := scr.Damage(since)
			if !ok || bareMove || beyondPointer(rects) {
				return reaction{reacted: true, waited: time.Since(start), counter: counter, changes: counter - since}, nil
			}
			if counter != seen {
				seen, last = counter, time.Now()
				cpu.mark()
			}
			if time.Since(last) >= quiet {
				if cpu.idle() {
					return reaction{idle: true, waited: time.Since(start), counter: counter, changes: counter - since}, nil
				}
				last = time.Now() // busy: the quiet period starts again
				cpu.mark()
			}
		}
		wait := time.Until(deadline)
		if !last.IsZero() {
			wait = min(wait, time.Until(last.Add(quiet)))
		}
		if time.Until(deadline) <= 0 {
			return reaction{waited: time.Since(start), counter: counter, changes: counter - since}, nil
		}
		if _, err := screenshot.WaitChanged(ctx, src, counter, max(wait, time.Millisecond)); err != nil {
			return reaction{}, err
		}
	}
}

// check refuses what no front door should pass on.
func (r Request) check() error {
	if len(r.Batch) == 0 {
		return fieldError("actions", "no actions given")
	}
	for _, err := range []error{SettleBound.Check(r.Settle), SettleTimeoutBound.Check(r.SettleTimeout), ReactionBound.Check(r.Reaction)} {
		if err != nil {
			return err
		}
	}
	return nil
}

// spaceOf is a batch's coordinate space on a native screen.
func spaceOf(native, display image.Point) input.Space {
	if display == (image.Point{}) {
		return screenshot.Identity(native.X, native.Y)
	}
	return screenshot.ScaleTo(native.X, native.Y, display.X, display.Y)
}

// settleAndCapture waits for the screen to stay unchanged for the quiet
// period (or the deadline), then captures it, or the zoom region.
func (s *Service) settleAndCapture(ctx context.Context, rn *runner, scr Screen, req Request, space input.Space, zoom *input.Rect) (Picture, error) {
	var pic Picture
	if req.Settle > 0 && req.SettleTimeout > 0 {
		got, err := screenshot.WaitSettled(ctx, scr.Source(), req.Settle, req.SettleTimeout)
		if err != nil {
			return pic, fmt.Errorf("wait for the screen to settle: %w", err)
		}
		pic.Settle = &got
	}
	o := screenshot.Options{Format: req.Format, Quality: req.Quality}
	w, h := space.Size()
	if zoom != nil {
		o.Region = image.Rect(zoom.X1, zoom.Y1, zoom.X2, zoom.Y2)
		o.Width, o.Height = fitInside(o.Region.Dx(), o.Region.Dy(), w, h)
	} else if req.Display != (image.Point{}) {
		o.Width, o.Height = w, h
	}
	if p, ok := rn.Position(); ok && req.Cursor {
		o.Cursor, o.Pointer = true, image.Pt(p.X, p.Y)
	}
	shot, err := scr.Capture(ctx, o)
	if err != nil {
		return pic, fmt.Errorf("capture the screen: %w", err)
	}
	pic.Shot = shot
	return pic, nil
}

// fitInside scales a w x h region up or down to the largest size that fits
// in maxW x maxH with the same aspect ratio: a zoom shows its region as
// large as the display the agent sees.
func fitInside(w, h, maxW, maxH int) (int, int) {
	if w <= 0 || h <= 0 {
		return maxW, maxH
	}
	f := math.Min(float64(maxW)/float64(w), float64(maxH)/float64(h))
	return max(1, int(math.Round(float64(w)*f))), max(1, int(math.Round(float64(h)*f)))
}

func hasKind(b input.Batch, k input.Kind) bool {
	for _, a := range b {
		if a.Kind == k {
			return true
		}
	}
	return false
}

func hasShot(b input.Batch) bool {
	return hasKind(b, input.KindScreenshot) || hasKind(b, input.KindZoom)
}
