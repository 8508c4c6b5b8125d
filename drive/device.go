package drive

import (
	"context"
	"image"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// device sends a runner's frames to the desktop's current machine (which
// changes across hibernate and wake, so it is looked up per frame), and
// pokes the desktop's screen mirror after each.
type device struct {
	s  *Service
	id string

	// What the last frames did, for the drag pacing below. Only the
	// runner's queue holder sends, one frame at a time, so these need no
	// lock.
	pos         input.Point
	moveCounter uint64    // the mirror's counter just before the last move
	moved       bool      // the last move changed the position
	held        int       // pointer buttons down (wheel notches are not held)
	justPressed bool      // the last pointer frame pressed a button
	dragged     bool      // a move went out while a button was held
	lastPointer time.Time // when the last pointer frame went out
	// pressCounter is the mirror's counter when the last press went out.
	pressCounter uint64
}

var _ input.Device = (*device)(nil)

func (d *device) Send(ctx context.Context, events []desktop.InputEvent) error {
	mach, dk, err := d.s.mgr.Machine(ctx, d.id, false)
	if err != nil {
		return err
	}
	// Releases always pass: a batch cut short by a person taking over must
	// not leave keys or buttons held under their hands.
	if !releasesOnly(events) {
		if err := dk.InputAllowed(); err != nil {
			return err
		}
	}
	move, presses, releases := frameKinds(events)
	switch {
	case move != nil && d.justPressed:
		err = d.sealPress(ctx, mach)
	case move != nil && d.held > 0:
		err = d.pause(ctx)
	case releases > 0 && d.dragged:
		err = d.endDrag(ctx)
	}
	if err != nil {
		return err
	}
	if move != nil {
		d.moveCounter = d.counter()
		d.moved = *move != d.pos
		d.pos = *move
		d.dragged = d.dragged || d.held > 0
	}
	d.held = max(0, d.held+presses-releases)
	if presses > 0 {
		d.dragged = false
		d.pressCounter = d.counter()
	}
	if d.held == 0 {
		d.dragged = false
	}
	if move != nil || presses > 0 || releases > 0 {
		d.justPressed = presses > 0
		d.lastPointer = time.Now()
	}
	err = mach.SendInput(ctx, events)
	d.s.poke(d.id)
	return err
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
	scr, ok := d.s.screens.Screen(d.id)
	if !ok {
		return nil
	}
	src := scr.Source()
	timeout := d.s.cfg.PressTimeout
	if d.moved {
		if _, err := screenshot.WaitChanged(ctx, src, d.moveCounter, timeout); err != nil {
			return err
		}
	}
	nudge := d.pos
	if sz, err := d.s.ScreenSize(d.id); err == nil && nudge.X+1 >= sz.X {
		nudge.X--
	} else {
		nudge.X++
	}
	before, _ := src.Changed()
	if err := mach.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: nudge.X, Y: nudge.Y}}); err != nil {
		return err
	}
	d.pos, d.justPressed = nudge, false
	_, err := screenshot.WaitChanged(ctx, src, before, timeout)
	return err
}

// pause spaces the moves of a drag by DragStep, so the guest sees each
// point as its own motion, as from a hand.
func (d *device) pause(ctx context.Context) error {
	return sleepUntil(ctx, d.lastPointer.Add(d.s.cfg.DragStep))
}

// endDrag holds a drag's button at its last point until the guest shows
// it acted on the drag, at most DragHold, then DragStep more. Acted on: the
// screen changed in more than the pointer's own redraw since the press (a
// window following, a selection growing). A release that reaches the X
// server before the window manager has taken the move loses the drag:
// openbox grabs the pointer with the motion's timestamp, which the release
// has made stale. Measured on the minimal image: openbox moved nothing when
// the release came 3 ms after the last move, or whenever it was busy (right
// after a restore, or rebinding its keys after a keymap change, 1 to 2.5 s
// under TCG), and moved the window every time it was held until the
// window moved.
func (d *device) endDrag(ctx context.Context) error {
	if scr, ok := d.s.screens.Screen(d.id); ok {
		deadline := time.Now().Add(d.s.cfg.DragHold)
		for {
			rects, ok := scr.Damage(d.pressCounter)
			if !ok || beyondPointer(rects) {
				break
			}
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			counter, _ := scr.Source().Changed()
			if _, err := screenshot.WaitChanged(ctx, scr.Source(), counter, wait); err != nil {
				return err
			}
		}
	}
	return sleepUntil(ctx, time.Now().Add(d.s.cfg.DragStep))
}

// pointerBox bounds what redrawing the pointer damages on the screen (a
// cursor image of up to 32 pixels, rounded out to QEMU's 16-pixel VNC
// tiles, old and new position).
const pointerBox = 64

// beyondPointer says whether damage holds more than pointer redraws.
func beyondPointer(rects []image.Rectangle) bool {
	for _, r := range rects {
		if r.Dx() > pointerBox || r.Dy() > pointerBox {
			return true
		}
	}
	return false
}

// sleepUntil waits until t or ctx's end. It paces input like a hand (a
// rate), not a wait for the guest to do something.
func sleepUntil(ctx context.Context, t time.Time) error {
	wait := time.Until(t)
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// counter is the mirror's change counter, 0 without a mirror.
func (d *device) counter() uint64 {
	if scr, ok := d.s.screens.Screen(d.id); ok {
		c, _ := scr.Source().Changed()
		return c
	}
	return 0
}

// frameKinds says what a frame does to the pointer: where it moves it, and
// how many buttons it presses and releases (wheel "buttons" left out: they
// are clicks to QEMU, never held).
func frameKinds(events []desktop.InputEvent) (move *input.Point, presses, releases int) {
	for _, e := range events {
		switch {
		case e.Kind == desktop.InputMove:
			move = &input.Point{X: e.X, Y: e.Y}
		case e.Kind != desktop.InputButton || isWheel(e.Button):
		case e.Down:
			presses++
		default:
			releases++
		}
	}
	return move, presses, releases
}

func isWheel(b string) bool {
	switch b {
	case "wheel-up", "wheel-down", "wheel-left", "wheel-right":
		return true
	}
	return false
}

func releasesOnly(events []desktop.InputEvent) bool {
	for _, e := range events {
		if e.Kind == desktop.InputMove || e.Down {
			return false
		}
	}
	return true
}
