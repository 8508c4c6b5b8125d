package app

import (
	"context"
	"fmt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/web"
)

// device sends a runner's frames to the desktop's current machine (which
// changes across hibernate and wake, so it is looked up per frame), and
// pokes the desktop's screen mirror after each.
type device struct {
	a  *Actions
	id string

	// What the last frames did, for sealPress. Only the runner's queue
	// holder sends, one frame at a time, so these need no lock.
	pos         input.Point
	moveCounter uint64 // the mirror's counter just before the last move
	moved       bool   // the last move changed the position
	justPressed bool   // the last pointer frame pressed a button
}

var _ input.Device = (*device)(nil)

func (d *device) Send(ctx context.Context, events []input.Event) error {
	mach, dk, err := d.a.mgr.Machine(ctx, d.id, false)
	if err != nil {
		return err
	}
	// Releases always pass: a batch cut short by a person taking over must
	// not leave keys or buttons held under their hands.
	if !releasesOnly(events) {
		if err := web.InputAllowed(dk); err != nil {
			return err
		}
	}
	move, press, release := frameKinds(events)
	if move != nil && d.justPressed {
		if err := d.sealPress(ctx, mach); err != nil {
			return err
		}
	}
	if move != nil {
		d.moveCounter = d.counter()
		d.moved = *move != d.pos
		d.pos = *move
	}
	switch {
	case press:
		d.justPressed = true
	case move != nil, release:
		d.justPressed = false
	}
	err = d.send(ctx, mach, events)
	d.a.poke(d.id)
	return err
}

func (d *device) send(ctx context.Context, mach desktop.Machine, events []input.Event) error {
	frame := make([]desktop.InputEvent, len(events))
	for i, e := range events {
		frame[i] = desktop.InputEvent{Key: e.Key, Button: e.Button, Down: e.Down, X: e.X, Y: e.Y}
		switch e.Kind {
		case input.KeyEvent:
			frame[i].Kind = desktop.InputKey
		case input.ButtonEvent:
			frame[i].Kind = desktop.InputButton
		case input.MoveEvent:
			frame[i].Kind = desktop.InputMove
		default:
			return fmt.Errorf("%w: input event kind %d", desktop.ErrInvalid, e.Kind)
		}
	}
	return mach.SendInput(ctx, frame)
}

// sealPress makes sure the guest has read a button press before the first
// move of a drag follows it. QEMU's USB tablet queues one report per
// button change and folds a move into the newest report the guest has not
// read yet when the buttons are the same, so a move sent while the press
// is still queued rewrites the press's position: the guest sees the button
// go down where it should come up, and nothing is dragged. Measured on the
// minimal image under TCG on a loaded host, the guest read a press 80 to
// over 100 ms after it was sent, so no fixed spacing is safe.
//
// The signal that the guest has read it is the screen: the guest draws
// the pointer into the framebuffer, so a one-pixel nudge after the press
// shows in the mirror only once the guest has read the press (folded into
// it, the nudge moves the press by a pixel, which no drag notices). The
// change the move before the press causes is waited for first, so it is
// not taken for the nudge's. Each wait is bounded by PressTimeout: a guest
// that draws no pointer (a hardware cursor) or a screen changing anyway
// make the drag go on after it, as it would have without the wait.
func (d *device) sealPress(ctx context.Context, mach desktop.Machine) error {
	scr, ok := d.a.screens.Get(d.id)
	if !ok {
		return nil
	}
	timeout := d.a.cfg.PressTimeout
	if d.moved {
		if _, err := screenshot.WaitChanged(ctx, scr.Mirror, d.moveCounter, timeout); err != nil {
			return err
		}
	}
	nudge := d.pos
	if w, _, err := d.a.ScreenSize(d.id); err == nil && nudge.X+1 >= w {
		nudge.X--
	} else {
		nudge.X++
	}
	before, _ := scr.Mirror.Changed()
	if err := d.send(ctx, mach, []input.Event{{Kind: input.MoveEvent, X: nudge.X, Y: nudge.Y}}); err != nil {
		return err
	}
	d.pos, d.justPressed = nudge, false
	_, err := screenshot.WaitChanged(ctx, scr.Mirror, before, timeout)
	return err
}

// counter is the mirror's change counter, 0 without a mirror.
func (d *device) counter() uint64 {
	if s, ok := d.a.screens.Get(d.id); ok {
		c, _ := s.Mirror.Changed()
		return c
	}
	return 0
}

// frameKinds says what a frame does to the pointer: where it moves it, and
// whether it presses or releases a button (wheel "buttons" included: they
// are clicks to QEMU, and never held).
func frameKinds(events []input.Event) (move *input.Point, press, release bool) {
	for _, e := range events {
		switch {
		case e.Kind == input.MoveEvent:
			move = &input.Point{X: e.X, Y: e.Y}
		case e.Kind == input.ButtonEvent && e.Down && !isWheel(e.Button):
			press = true
		case e.Kind == input.ButtonEvent && !e.Down:
			release = true
		}
	}
	return move, press, release
}

func isWheel(b string) bool {
	switch b {
	case "wheel-up", "wheel-down", "wheel-left", "wheel-right":
		return true
	}
	return false
}

func releasesOnly(events []input.Event) bool {
	for _, e := range events {
		if e.Kind == input.MoveEvent || e.Down {
			return false
		}
	}
	return true
}
