package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/web"
)

// Actions implements web.Actions: one input.Runner per desktop, made on
// first use, whose device sends frames through the desktop's machine and
// pokes its screen mirror; and the guest agent's commands (exec, files,
// clipboard, and typing text the US layout cannot).
type Actions struct {
	mgr     *desktop.Manager
	screens *Screens
	log     *slog.Logger
	cfg     ActionsConfig

	mu    sync.Mutex
	desks map[string]*desk
}

var _ web.Actions = (*Actions)(nil)

// ActionsConfig tunes Actions. The zero value is fine.
type ActionsConfig struct {
	// Limits bound each batch; zero fields take input's defaults.
	Limits input.Limits
	// KeystrokeInterval is the typing rate; 0 takes input's default.
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
}

// DefaultDragHold is the default bound of a drag's wait at its end: a
// drag with no visible effect costs this much.
const DefaultDragHold = 1500 * time.Millisecond

// DefaultDragStep is the default spacing of a drag's moves.
const DefaultDragStep = 30 * time.Millisecond

// DefaultPressTimeout is the default bound of a drag's wait for its press.
const DefaultPressTimeout = 500 * time.Millisecond

// desk is one desktop's input state.
type desk struct {
	runner *input.Runner
	typing typingSlots
}

// NewActions returns the action API's back end. It follows the Manager's
// events until ctx ends: held input is released when a person takes
// control, and a deleted desktop's state is dropped.
func NewActions(ctx context.Context, mgr *desktop.Manager, screens *Screens, log *slog.Logger, cfg ActionsConfig) *Actions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
	a := &Actions{mgr: mgr, screens: screens, log: log, cfg: cfg, desks: map[string]*desk{}}
	go a.watch(ctx)
	return a
}

// Runner returns a desktop's runner, making it on first use.
func (a *Actions) Runner(id string) (*input.Runner, error) {
	d, err := a.desk(id)
	if err != nil {
		return nil, err
	}
	return d.runner, nil
}

func (a *Actions) desk(id string) (*desk, error) {
	if _, err := a.mgr.Get(id); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if d, ok := a.desks[id]; ok {
		return d, nil
	}
	d := &desk{}
	r, err := input.NewRunner(input.RunnerConfig{
		Device:            &device{a: a, id: id},
		Guest:             guestTyper{a: a, id: id, slots: &d.typing},
		Limits:            a.cfg.Limits,
		KeystrokeInterval: a.cfg.KeystrokeInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("input for %s: %w", id, err)
	}
	d.runner = r
	a.desks[id] = d
	return d, nil
}

// ScreenSize is the size of the mirror's picture, or of the snapshot's
// screen before the mirror has one.
func (a *Actions) ScreenSize(id string) (int, int, error) {
	if s, ok := a.screens.Get(id); ok {
		if sz := s.Mirror.Size(); sz.X > 0 && sz.Y > 0 {
			return sz.X, sz.Y, nil
		}
	}
	d, err := a.mgr.Get(id)
	if err != nil {
		return 0, 0, err
	}
	snap, err := a.mgr.Catalog().Get(d.Snapshot)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: screen size of %s: %w", desktop.ErrUnavailable, id, err)
	}
	return snap.Manifest.Machine.Width, snap.Manifest.Machine.Height, nil
}

// poke tells the desktop's mirror to look for changes now: QEMU's VNC
// server backs off its refresh while idle, and input sent through QMP does
// not reset that back-off, so without a poke the effect of input could
// reach the mirror only seconds later.
func (a *Actions) poke(id string) {
	if s, ok := a.screens.Get(id); ok {
		s.Mirror.Poke()
	}
}

// watch follows the Manager's events until ctx ends.
func (a *Actions) watch(ctx context.Context) {
	for ctx.Err() == nil {
		events, stop := a.mgr.Subscribe()
		for open := true; open; {
			select {
			case <-ctx.Done():
				open = false
			case ev, ok := <-events:
				if !ok {
					open = false // fell behind: subscribe again
					break
				}
				a.handle(ctx, ev)
			}
		}
		stop()
	}
}

func (a *Actions) handle(ctx context.Context, ev desktop.Event) {
	id := ev.Desktop.ID
	switch ev.Type {
	case desktop.EventDeleted:
		a.mu.Lock()
		delete(a.desks, id)
		a.mu.Unlock()
	case desktop.EventControl:
		a.mu.Lock()
		d := a.desks[id]
		a.mu.Unlock()
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
					a.log.Warn("release agent input on handover", "desktop", id, "err", err)
				}
				return
			}
			// The person moved the pointer without the runner seeing it.
			if err := a.LocatePointer(ctx, id); err != nil {
				a.log.Debug("locate pointer after handover", "desktop", id, "err", err)
			}
		}()
	}
}
