// Package app wires hostd together: the driver, the snapshot catalog, the
// records store, the Manager, one screen mirror per live desktop, and the
// web server.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/vnc"
	"github.com/warmdesk/warmdesk/web"
)

var _ screenshot.Source = (*vnc.Mirror)(nil)

// Screen is one desktop's live screen: an RFB mirror of QEMU's VNC server
// and a capturer that caches encoded pictures per change. It outlives the
// machine behind it across hibernate and wake: the mirror keeps the last
// picture and reconnects when the machine is back.
type Screen struct {
	ID       string
	Mirror   *vnc.Mirror
	Capturer *screenshot.Capturer

	mu      sync.Mutex
	machine desktop.Machine
	cancel  context.CancelFunc
}

// Dial connects to the current machine's VNC server.
func (s *Screen) Dial(ctx context.Context) (net.Conn, error) {
	s.mu.Lock()
	m := s.machine
	s.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("%w: desktop %s is not running", desktop.ErrConflict, s.ID)
	}
	return m.DialVNC(ctx)
}

// Screens keeps the Screen of every desktop. It is the Manager's Observer.
type Screens struct {
	log  *slog.Logger
	base context.Context

	mu   sync.Mutex
	byID map[string]*Screen
	// added is closed and replaced whenever a screen joins byID.
	added chan struct{}
}

var _ desktop.Observer = (*Screens)(nil)

// NewScreens returns an empty set; mirrors run under base.
func NewScreens(base context.Context, log *slog.Logger) *Screens {
	return &Screens{log: log, base: base, byID: map[string]*Screen{}, added: make(chan struct{})}
}

// RefillGate is the QEMU driver's gate for pool refills: the desktop's
// first frame. nil for a nil Screens.
func (ss *Screens) RefillGate() func(context.Context, string) {
	if ss == nil {
		return nil
	}
	return func(ctx context.Context, id string) { ss.WaitFrame(ctx, id) }
}

// WaitFrame waits until a desktop's screen holds a frame, or ctx ends. The
// screen need not exist yet: a desktop being created gets it once its
// machine is up. A screen forgotten before its first frame waits out ctx.
func (ss *Screens) WaitFrame(ctx context.Context, id string) error {
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

// MachineUp attaches (or reattaches) a desktop's mirror to its machine.
func (ss *Screens) MachineUp(id string, m desktop.Machine) {
	ss.mu.Lock()
	s, ok := ss.byID[id]
	if !ok {
		s = &Screen{ID: id}
		s.Mirror = vnc.NewMirror(vnc.MirrorOptions{Dial: s.Dial, Logger: ss.log.With("desktop", id)})
		s.Capturer = screenshot.NewCapturer(s.Mirror, screenshot.CaptureConfig{})
		ss.byID[id] = s
		close(ss.added)
		ss.added = make(chan struct{})
	}
	ss.mu.Unlock()
	s.mu.Lock()
	s.machine = m
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
	if !start {
		s.Mirror.Reconnect()
	}
}

// MachineDown detaches the machine; the mirror keeps its last picture.
func (ss *Screens) MachineDown(id string) {
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
func (ss *Screens) Forget(id string) {
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
func (ss *Screens) Get(id string) (*Screen, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return s, ok
}

// Source is the live framebuffer.
func (s *Screen) Source() screenshot.Source { return s.Mirror }

// Capture encodes a picture of the screen.
func (s *Screen) Capture(ctx context.Context, o screenshot.Options) (screenshot.Shot, error) {
	return s.Capturer.Capture(ctx, o)
}

// Ready is closed once the mirror holds a frame.
func (s *Screen) Ready() <-chan struct{} { return s.Mirror.Ready() }

// Screen implements web.Screens.
func (ss *Screens) Screen(id string) (web.Screen, bool) {
	s, ok := ss.Get(id)
	if !ok {
		return nil, false
	}
	return s, true
}
