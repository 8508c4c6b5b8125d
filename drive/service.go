// Package drive is the one service that drives desktops. It runs batches
// of input actions (validated, queued per desktop in arrival order, paced,
// refused while a person holds control, then settled and pictured), runs
// programs in the guest, moves files and the clipboard, and keeps each
// desktop's screen mirror. It knows nothing of HTTP: every front door (web's
// handlers and control WebSocket, the bench, and the adapters to come)
// decodes its own wire form, calls a method here, and encodes the answer.
//
// A batch's path to QEMU: Service.Run checks the desktop and the batch,
// input.Compile resolves it, the desktop's runner (runner.go) runs the
// actions in order, turning each into frames (frames.go) that it paces and
// whose held keys and buttons it tracks, and the runner's device
// (device.go) paces each frame further and hands it to the desktop's
// desktop.Machine, which writes it to QMP.
package drive

import (
	"context"
	"fmt"
	"image"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// Config wires a Service. Manager and Screens are required; the zero value
// of everything else is a sensible default.
type Config struct {
	Manager *desktop.Manager
	// Screens finds each desktop's live screen (Mirrors in hostd).
	Screens Screens
	// Guests reaches ports inside guests (egress.Set in hostd); nil
	// refuses DialPort.
	Guests GuestDialer
	Logger *slog.Logger
	// Limits bound each batch; zero fields take input's defaults.
	Limits input.Limits
	// KeystrokeInterval is the typing rate; 0 takes
	// DefaultKeystrokeInterval.
	KeystrokeInterval time.Duration
	// PressTimeout bounds each wait for the guest to show it read a drag's
	// button press (see device.sealPress); 0 takes DefaultPressTimeout.
	PressTimeout time.Duration
	// DragStep spaces the moves of a drag and holds its end (see
	// device.pause and device.endDrag); 0 takes DefaultDragStep.
	DragStep time.Duration
	// DragHold bounds how long a drag's end waits for the guest to act on
	// it (device.endDrag); 0 takes DefaultDragHold.
	DragHold time.Duration
	// DragBusyHold bounds how much longer a drag's end is held while the
	// guest's CPUs stay busy with nothing moved (device.holdWhileBusy); 0
	// takes DefaultDragBusyHold.
	DragBusyHold time.Duration
	// KeyWait bounds each wait for the guest to show it read a click
	// before keys follow it (device.sealPointer); 0 takes DefaultKeyWait.
	KeyWait time.Duration
	// KeyReaction bounds the wait, after that, for the screen to react to
	// the click, and then the wait for the guest's CPUs to go idle; and a
	// button press's wait, from the last key before it, for the guest to
	// take the keys (device.sealKeys). 0 takes DefaultReaction.
	KeyReaction time.Duration
	// Pressure reads the host's CPU pressure (0 to 1); when set, a batch
	// asking for the default reaction bound gets it stretched on a busy
	// host (reactionFor).
	Pressure func() float64
}

// DefaultDragHold is the default bound of a drag's wait at its end: a
// drag with no visible effect costs this much.
const DefaultDragHold = 1500 * time.Millisecond

// DefaultDragBusyHold is the default bound of a drag's further hold while
// the guest stays busy.
const DefaultDragBusyHold = 5 * time.Second

// DefaultDragStep is the default spacing of a drag's moves.
const DefaultDragStep = 30 * time.Millisecond

// DefaultPressTimeout is the default bound of a drag's wait for its press.
const DefaultPressTimeout = 500 * time.Millisecond

// DefaultKeyWait is the default bound of each wait for the guest to read a
// click before keys follow it: the tablet's reports were seen held back
// more than a second right after a restore under TCG.
const DefaultKeyWait = 2 * time.Second

// Service drives desktops. Safe for concurrent use.
type Service struct {
	mgr     *desktop.Manager
	screens Screens
	log     *slog.Logger
	cfg     Config

	mu       sync.Mutex
	desks    map[string]*desk
	links    map[string]*devtoolsLink
	browsers map[string]*browserLink
}

// desk is one desktop's input state.
type desk struct {
	runner *runner
	typing typingSlots
	// keysAt is when keys last went to the desktop (Unix nanoseconds, 0
	// for never): an accessibility walk waits for the guest to take them
	// (Service.afterKeys).
	keysAt atomic.Int64
}

// New returns the service. It follows the Manager's events until ctx ends:
// held input is released when a person takes control, and a deleted
// desktop's state is dropped.
func New(ctx context.Context, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PressTimeout <= 0 {
		cfg.PressTimeout = DefaultPressTimeout
	}
	if cfg.DragStep <= 0 {
		cfg.DragStep = DefaultDragStep
	}
	if cfg.DragHold <= 0 {
		cfg.DragHold = DefaultDragHold
	}
	if cfg.DragBusyHold <= 0 {
		cfg.DragBusyHold = DefaultDragBusyHold
	}
	if cfg.KeyWait <= 0 {
		cfg.KeyWait = DefaultKeyWait
	}
	if cfg.KeyReaction <= 0 {
		cfg.KeyReaction = DefaultReaction
	}
	s := &Service{mgr: cfg.Manager, screens: cfg.Screens, log: cfg.Logger, cfg: cfg, desks: map[string]*desk{}}
	go s.watch(ctx)
	return s
}

// Manager is the Manager the service drives desktops of.
func (s *Service) Manager() *desktop.Manager { return s.mgr }

// desk returns a desktop's input state, making it on first use.
func (s *Service) desk(id string) (*desk, error) {
	if _, err := s.mgr.Get(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.desks[id]; ok {
		return d, nil
	}
	d := &desk{}
	dev := &device{s: s, id: id, keysAt: &d.keysAt}
	r, err := newRunner(runnerConfig{
		Device:            dev,
		Guest:             guestTyper{s: s, id: id, dev: dev, slots: &d.typing},
		Limits:            s.cfg.Limits,
		KeystrokeInterval: s.cfg.KeystrokeInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("input for %s: %w", id, err)
	}
	d.runner = r
	s.desks[id] = d
	return d, nil
}

// ScreenSize is the size of the mirror's picture, or of the snapshot's
// screen before the mirror has one.
func (s *Service) ScreenSize(id string) (image.Point, error) {
	if sz, ok := s.liveSize(id); ok {
		return sz, nil
	}
	snap, err := s.snapshotOf(id)
	if err != nil {
		return image.Point{}, fmt.Errorf("screen size of %s: %w", id, err)
	}
	return manifestSize(snap), nil
}

// liveSize is the size of the desktop's screen as its mirror has it.
func (s *Service) liveSize(id string) (image.Point, bool) {
	if scr, ok := s.screens.Screen(id); ok {
		if sz := scr.Size(); sz.X > 0 && sz.Y > 0 {
			return sz, true
		}
	}
	return image.Point{}, false
}

// snapshotOf is the snapshot a desktop was made from; a snapshot gone from
// the catalog is ErrUnavailable.
func (s *Service) snapshotOf(id string) (desktop.Snapshot, error) {
	d, err := s.mgr.Get(id)
	if err != nil {
		return desktop.Snapshot{}, err
	}
	snap, err := s.mgr.Lineage().Catalog().Get(d.Snapshot)
	if err != nil {
		return desktop.Snapshot{}, fmt.Errorf("%w: %w", desktop.ErrUnavailable, err)
	}
	return snap, nil
}

func manifestSize(snap desktop.Snapshot) image.Point {
	return image.Pt(snap.Manifest.Machine.Width, snap.Manifest.Machine.Height)
}

// Profile is what a door needs to know of a desktop to speak for it: its
// screen and whether it has the browser image's Chromium.
type Profile struct {
	Screen  image.Point
	Browser bool
}

// Profile reads a desktop's profile: the screen as ScreenSize has it, the
// browser from its snapshot's image.
func (s *Service) Profile(id string) (Profile, error) {
	snap, err := s.snapshotOf(id)
	if err != nil {
		return Profile{}, fmt.Errorf("profile of %s: %w", id, err)
	}
	screen, ok := s.liveSize(id)
	if !ok {
		screen = manifestSize(snap)
	}
	return Profile{Screen: screen, Browser: snap.Manifest.Image.Flavor == ChromiumFlavor}, nil
}

// Pointer is where the desktop's pointer is, in native pixels, as far as
// the service knows; ok is false before any pointer action or LocatePointer.
func (s *Service) Pointer(id string) (input.Point, bool) {
	d, err := s.desk(id)
	if err != nil {
		return input.Point{}, false
	}
	return d.runner.Position()
}

// Release lets go of every key and button an agent holds on the desktop,
// after its running batch.
func (s *Service) Release(ctx context.Context, id string) error {
	d, err := s.desk(id)
	if err != nil {
		return err
	}
	return d.runner.Release(ctx)
}

// poke tells the desktop's mirror to look for changes now: QEMU's VNC
// server backs off its refresh while idle, and input sent through QMP does
// not reset that back-off, so without a poke the effect of input could
// reach the mirror only seconds later.
func (s *Service) poke(id string) {
	if scr, ok := s.screens.Screen(id); ok {
		scr.Source().Poke()
	}
}

// watch follows the Manager's events until ctx ends.
func (s *Service) watch(ctx context.Context) {
	s.mgr.Events().Follow(ctx, func(ev desktop.Event) { s.handle(ctx, ev) })
}

func (s *Service) handle(ctx context.Context, ev desktop.Event) {
	id := ev.Desktop.ID
	switch ev.Type {
	case desktop.EventDeleted, desktop.EventReset:
		// A reset desktop is a new guest: no key is held in it, its
		// pointer is where the snapshot's was, its Chromium is new.
		s.mu.Lock()
		delete(s.desks, id)
		s.mu.Unlock()
		var keep desktop.Machine
		if ev.Type == desktop.EventReset {
			keep, _, _ = s.mgr.Machine(ctx, id, desktop.WaitNone) // nil if it is gone since
		}
		s.dropDevTools(id, keep)
		s.dropBrowser(id)
	case desktop.EventControl:
		s.mu.Lock()
		d := s.desks[id]
		s.mu.Unlock()
		if d == nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if ev.Desktop.Control.Holder == desktop.ControlPerson {
				// Whatever an agent holds (a mouse_down, a hold_key in
				// flight) is let go before the person's hands arrive.
				if err := d.runner.Release(ctx); err != nil {
					s.log.Warn("release agent input on handover", "desktop", id, "err", err)
				}
				return
			}
			// The person moved the pointer without the runner seeing it.
			if err := s.LocatePointer(ctx, id); err != nil {
				s.log.Debug("locate pointer after handover", "desktop", id, "err", err)
			}
		}()
	}
}
