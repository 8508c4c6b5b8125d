package drive

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/vnc"
)

// Screen is one desktop's live screen.
type Screen interface {
	// Source is the live framebuffer.
	Source() screenshot.Source
	// Capture encodes a picture, cached per change.
	Capture(ctx context.Context, o screenshot.Options) (screenshot.Shot, error)
	// Dial opens a new connection to the desktop's VNC server.
	Dial(ctx context.Context) (net.Conn, error)
	// Ready is closed once the screen holds a first complete frame.
	Ready() <-chan struct{}
	// Size is the screen's size, zero before the first frame.
	Size() image.Point
	// Damage returns the areas that changed since the change counter
	// since; ok is false when that is no longer known.
	Damage(since uint64) (rects []image.Rectangle, ok bool)
}

// Screens finds a desktop's screen.
type Screens interface {
	Screen(id string) (Screen, bool)
}

var (
	_ screenshot.Source = (*vnc.Mirror)(nil)
	_ Screen            = (*Mirror)(nil)
	_ Screens           = (*Mirrors)(nil)
	_ desktop.Observer  = (*Mirrors)(nil)
)

// Mirror is one desktop's live screen: an RFB mirror of QEMU's VNC server
// and a capturer that caches encoded pictures per change. It outlives the
// machine behind it across hibernate and wake: the mirror keeps the last
// picture and reconnects when the machine is back.
type Mirror struct {
	ID       string
	Mirror   *vnc.Mirror
	Capturer *screenshot.Capturer

	mu      sync.Mutex
	machine desktop.Machine
	cancel  context.CancelFunc
}

// Dial connects to the current machine's VNC server.
func (s *Mirror) Dial(ctx context.Context) (net.Conn, error) {
	s.mu.Lock()
	m, id := s.machine, s.ID
	s.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("%w: desktop %s is not running", desktop.ErrConflict, id)
	}
	return m.DialVNC(ctx)
}

// Mirrors keeps the Mirror of every desktop. It is the Manager's Observer.
type Mirrors struct {
	log  *slog.Logger
	base context.Context

	mu   sync.Mutex
	byID map[string]*Mirror
	// added is closed and replaced whenever a screen joins byID.
	added chan struct{}
	// pooled are the painted connections of warm-pool machines no desktop
	// has taken yet.
	pooled map[desktop.Machine]*vnc.Painted
	// noPrewarm turns prewarming off (the bench's baseline).
	noPrewarm atomic.Bool
}

// NewMirrors returns an empty set; mirrors run under base.
func NewMirrors(base context.Context, log *slog.Logger) *Mirrors {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mirrors{log: log, base: base, byID: map[string]*Mirror{}, added: make(chan struct{}), pooled: map[desktop.Machine]*vnc.Painted{}}
}

// Warmup is the QEMU driver's warm-up for pool machines: next (when set),
// then a VNC connection to the machine painted with its whole screen
// (vnc.Paint), which the desktop that takes the machine hands to its
// mirror (MachineUp): a create or a reset from the pool returns to a screen
// already painted. Without it, the mirror's connection and first frame were
// 85 of an 89 ms pool create (p50, docs/BENCHMARKS.md, the create's
// phases, TCG). The connection of a pool machine nobody takes ends with
// it. It costs hostd the connection's framebuffer (4 MB at 1280x800) per
// pool machine.
func (ss *Mirrors) Warmup(next func(context.Context, desktop.Machine, desktop.Snapshot) error) func(context.Context, desktop.Machine, desktop.Snapshot) error {
	if ss == nil {
		return next
	}
	return func(ctx context.Context, m desktop.Machine, snap desktop.Snapshot) error {
		var err error
		if next != nil {
			err = next(ctx, m, snap)
		}
		if ss.noPrewarm.Load() {
			return err
		}
		p, perr := vnc.Paint(ctx, vnc.MirrorOptions{Dial: m.DialVNC})
		if perr != nil {
			return errors.Join(err, fmt.Errorf("the pool machine's screen: %w", perr))
		}
		ss.mu.Lock()
		ss.pooled[m] = p
		ss.mu.Unlock()
		go func() {
			select {
			case <-m.Exited():
			case <-ss.base.Done():
			}
			if p := ss.takePooled(m); p != nil {
				p.Close()
			}
		}()
		return err
	}
}

// SetPrewarm turns the pool machines' painted connections on (the
// default) or off; the bench measures creates both ways.
func (ss *Mirrors) SetPrewarm(on bool) { ss.noPrewarm.Store(!on) }

// takePooled removes and returns the painted connection of a pool
// machine, if it has one.
func (ss *Mirrors) takePooled(m desktop.Machine) *vnc.Painted {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	p := ss.pooled[m]
	delete(ss.pooled, m)
	return p
}

// RefillGate is the QEMU driver's gate for pool refills: the desktop's
// first frame, then its guest going idle (until ctx ends). A guest just
// handed over is busy for a while (its clock and identity set; under TCG a
// guest restored without warming was busy on both virtual CPUs for 0.5 to
// 1.3 s), and a QEMU spawning meanwhile slows the first things a client
// does with the new desktop. nil for a nil Mirrors.
func (ss *Mirrors) RefillGate() func(context.Context, string) {
	if ss == nil {
		return nil
	}
	return func(ctx context.Context, id string) {
		if ss.WaitFrame(ctx, id) != nil {
			return
		}
		s, ok := ss.Get(id)
		if !ok {
			return
		}
		s.mu.Lock()
		m := s.machine
		s.mu.Unlock()
		deadline, ok := ctx.Deadline()
		if m == nil || !ok {
			return
		}
		newCPUMeter(m.VCPUTime).waitIdle(ctx, time.Until(deadline))
	}
}

// WaitFrame waits until a desktop's screen holds a frame, or ctx ends. The
// screen need not exist yet: a desktop being created gets it once its
// machine is up. A screen forgotten before its first frame waits out ctx.
func (ss *Mirrors) WaitFrame(ctx context.Context, id string) error {
	for {
		ss.mu.Lock()
		s, ok := ss.byID[id]
		added := ss.added
		ss.mu.Unlock()
		if ok {
			select {
			case <-s.Ready():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// MachineUp attaches (or reattaches) a desktop's mirror to its machine,
// on the machine's painted connection when the pool made one.
func (ss *Mirrors) MachineUp(id string, m desktop.Machine) {
	painted := ss.takePooled(m)
	ss.mu.Lock()
	s, ok := ss.byID[id]
	if !ok {
		s = &Mirror{ID: id}
		s.Mirror = vnc.NewMirror(vnc.MirrorOptions{Dial: s.Dial, Logger: ss.log.With("desktop", id)})
		s.Capturer = screenshot.NewCapturer(s.Mirror, screenshot.CaptureConfig{})
		ss.byID[id] = s
		close(ss.added)
		ss.added = make(chan struct{})
	}
	ss.mu.Unlock()
	s.mu.Lock()
	s.machine = m
	if painted != nil {
		s.Mirror.Offer(painted)
	}
	start := s.cancel == nil
	if start {
		ctx, cancel := context.WithCancel(ss.base)
		s.cancel = cancel
		go func() {
			if err := s.Mirror.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				ss.log.Warn("screen mirror ended", "desktop", id, "err", err)
			}
		}()
	}
	s.mu.Unlock()
	if !start && painted == nil {
		s.Mirror.Reconnect()
	}
}

// MachineDown detaches the machine; the mirror keeps its last picture.
func (ss *Mirrors) MachineDown(id string) {
	ss.mu.Lock()
	s := ss.byID[id]
	ss.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.machine = nil
		s.mu.Unlock()
	}
}

// Forget stops and drops a deleted desktop's screen.
func (ss *Mirrors) Forget(id string) {
	ss.mu.Lock()
	s := ss.byID[id]
	delete(ss.byID, id)
	ss.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.machine = nil
		s.mu.Unlock()
	}
}

// Get returns a desktop's screen.
func (ss *Mirrors) Get(id string) (*Mirror, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return s, ok
}

// Source is the live framebuffer.
func (s *Mirror) Source() screenshot.Source { return s.Mirror }

// Capture encodes a picture of the screen.
func (s *Mirror) Capture(ctx context.Context, o screenshot.Options) (screenshot.Shot, error) {
	return s.Capturer.Capture(ctx, o)
}

// Ready is closed once the mirror holds a frame.
func (s *Mirror) Ready() <-chan struct{} { return s.Mirror.Ready() }

// Size is the mirror's picture size.
func (s *Mirror) Size() image.Point { return s.Mirror.Size() }

// Damage returns the areas changed since a counter.
func (s *Mirror) Damage(since uint64) ([]image.Rectangle, bool) { return s.Mirror.Damage(since) }

// Screen implements Screens.
func (ss *Mirrors) Screen(id string) (Screen, bool) {
	s, ok := ss.Get(id)
	if !ok {
		return nil, false
	}
	return s, true
}

// FirstFrameWait bounds how long a request waits for a new mirror's first
// frame (right after a create or a hostd restart).
const FirstFrameWait = 10 * time.Second

// Screen returns a desktop's screen, if it has one yet.
func (s *Service) Screen(id string) (Screen, bool) { return s.screens.Screen(id) }

// LiveScreen finds a desktop's screen once it holds a frame: a paused
// desktop still has a screen; a hibernated or failed one does not. It
// waits at most FirstFrameWait for the first frame.
func (s *Service) LiveScreen(ctx context.Context, id string) (Screen, desktop.Desktop, error) {
	d, err := s.mgr.Get(id)
	if err != nil {
		return nil, d, err
	}
	if !d.State.Live() {
		return nil, d, &desktop.TransitionError{ID: id, From: d.State, Action: "show the screen of"}
	}
	scr, err := s.readyScreen(ctx, id)
	return scr, d, err
}

// readyScreen finds a desktop's screen once its mirror holds a frame.
func (s *Service) readyScreen(ctx context.Context, id string) (Screen, error) {
	scr, ok := s.screens.Screen(id)
	if !ok {
		return nil, fmt.Errorf("%w: desktop %s has no screen yet", desktop.ErrUnavailable, id)
	}
	ctx, cancel := context.WithTimeout(ctx, FirstFrameWait)
	defer cancel()
	select {
	case <-scr.Ready():
		return scr, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: desktop %s: no picture from its VNC server within %s", desktop.ErrUnavailable, id, FirstFrameWait)
	}
}
