package drive

import (
	"context"
	"fmt"
	"image"
	"sync/atomic"
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
	// unread says a pointer button frame went out that the guest has not
	// been seen to read: keys must wait for it (sealPointer).
	unread bool
	// keysSent is when the last key frame went out, zero once a button
	// press has waited for the guest to take it (sealKeys).
	keysSent time.Time
	// keysAt is the desk's record of the last keys, which an
	// accessibility walk reads from outside the runner's queue.
	keysAt *atomic.Int64
}

var _ inputDevice = (*device)(nil)

func (d *device) Send(ctx context.Context, events []desktop.InputEvent) error {
	mach, dk, err := d.s.mgr.Machine(ctx, d.id, desktop.WaitIdentity)
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
		err = d.endDrag(ctx, mach)
	case d.unread && hasKeys(events):
		err = d.sealPointer(ctx, mach)
	case !d.keysSent.IsZero() && pressesButton(events):
		err = d.sealKeys(ctx, mach)
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
	if buttonFrame(events) {
		d.unread = true
	}
	if hasKeys(events) {
		d.keysSent = time.Now()
		d.markKeys(d.keysSent)
	}
	batchOf(ctx).sent(d.counter())
	err = mach.SendInput(ctx, events)
	d.s.poke(d.id)
	return err
}

// markKeys records that keys went to the guest at t.
func (d *device) markKeys(t time.Time) { d.keysAt.Store(t.UnixNano()) }

// sealPress makes sure the guest has read a button press before the first
// move of a drag follows it. QEMU's USB tablet (the pointer of snapshots
// baked before the virtio tablet) queues one report per button change and
// folds a move into the newest report the guest has not read yet when the
// buttons are the same, so a move sent while the press is still queued
// rewrites the press's position: the guest sees the button go down where
// it should come up, and nothing is dragged. Measured on the minimal image
// under TCG on a loaded host, the guest read a press 80 to over 100 ms
// after it was sent, so no fixed spacing is safe. The virtio tablet does
// not fold, but a window manager still wants the press before the move.
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
	d.justPressed = false
	_, err := d.nudge(ctx, mach, d.s.cfg.PressTimeout, anyChange)
	return err
}

// sealPointer makes sure the application under the pointer has taken a
// click before keys follow it, in two steps.
//
// First the guest must have read the click. QEMU's keyboard (PS/2, an
// interrupt per byte) and its pointer (a virtio tablet, or on older
// snapshots a USB tablet polled late) are separate guest devices,
// so keys sent right after a click can reach the X server before it. Once
// the guest has drawn a nudge sent after the click, it has read the
// click, and X, which handles a device's events in order, has delivered it
// before any key that follows. Only a small redraw at the pointer counts
// as drawing it (not a page repainting around it). The pointer goes back
// at once: only its report's place in the queue mattered.
//
// Then the application must have acted on it. Chromium routes a click to
// the page through an asynchronous hit test and keys straight to the
// focused page, so keys that reach it after the click can still be handled
// before it: with only the first step, the text landed in 2 of 8 trials
// (docs/API.md, "Keys after a click"). The signal is the screen reacting
// to the click: a change larger than the pointer's redraw since the press
// (a focus ring, a window coming forward), or any change once the pointer
// is back and its redraw done, which is the application's. A click into a
// text field shows only its caret, no larger than the pointer's redraw
// (logged on the browser image: no trial saw more), which is why the
// pointer is settled first. The wait is bounded by KeyReaction, since many
// clicks change nothing visible. A reaction larger than the pointer is not the end of
// the handling (Chromium paints the focus ring before its renderer has
// taken the focus for keys), so after one the keys also wait for the
// guest's CPUs to go idle, at most KeyReaction more.
//
// Without the first signal within KeyWait the keys go on, and the batch
// says so; every wait counts in its sync time.
func (d *device) sealPointer(ctx context.Context, mach desktop.Machine) error {
	d.unread = false
	home := d.pos
	seen, err := d.nudge(ctx, mach, d.s.cfg.KeyWait, pointerDrawn)
	if err != nil {
		return err
	}
	if !seen {
		batchOf(ctx).warn(fmt.Sprintf("keys followed a click without the guest being seen to take the click within %s (no pointer redraw showed): they may reach the window that had the focus before it", d.s.cfg.KeyWait))
	}
	scr, ok := d.s.screens.Screen(d.id)
	if d.pos != home {
		d.pos = home
		var before uint64
		if ok {
			before, _ = scr.Source().Changed()
		}
		if err := mach.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: home.X, Y: home.Y}}); err != nil {
			return err
		}
		d.s.poke(d.id)
		if ok && seen {
			start := time.Now()
			_, err := waitDamage(ctx, scr, before, d.s.cfg.KeyWait, pointerDrawn(home))
			batchOf(ctx).waited(time.Since(start))
			if err != nil {
				return err
			}
		}
	}
	if !ok || !seen {
		return nil
	}
	start := time.Now()
	defer func() { batchOf(ctx).waited(time.Since(start)) }()
	// QEMU's VNC server may send the pointer's redraw in two updates (it
	// looked at the framebuffer while the guest was drawing): the second
	// would pass for the application's change. The redraw is done once a
	// few refreshes pass without a change.
	quiet, err := screenshot.WaitSettled(ctx, scr.Source(), pointerQuiet, d.s.cfg.KeyWait)
	if err != nil {
		return err
	}
	settled := quiet.Counter
	var large bool
	reacted, err := waitDamage(ctx, scr, d.pressCounter, d.s.cfg.KeyReaction, func(rects []image.Rectangle) bool {
		large = beyondPointer(rects)
		counter, _ := scr.Source().Changed()
		return large || counter > settled
	})
	d.s.log.Debug("keys after a click", "desktop", d.id, "reacted", reacted, "large", large, "waited", time.Since(start))
	if err != nil || !reacted || !large {
		return err
	}
	cpu := newCPUMeter(mach.VCPUTime)
	if idle, err := cpu.waitIdle(ctx, d.s.cfg.KeyReaction); err != nil || idle {
		return err
	}
	batchOf(ctx).warn(fmt.Sprintf("keys followed a click while the desktop was still busy acting on it %s after its first reaction: an application slow to take the click may miss them", d.s.cfg.KeyReaction))
	return nil
}

// sealKeys makes sure the guest has taken the keys sent before a button
// press that follows them. The reverse of sealPointer: the keyboard is
// PS/2, an interrupt per byte, and the tablet a virtqueue, so a click sent
// right after a typed word can reach the X server before the word's last
// keys. Seen in CI on a loaded host: a click on Go right after "w00001"
// retitled the page "clicked: w0000". The screen says nothing general
// here (not every key draws), but the guest's CPUs do: a pending key
// keeps interrupting the guest, so a window in which they were idle means
// the guest has read every key and its applications are done with them.
// Bounded by KeyReaction from the last key: a browser desktop fresh from
// its restore stays busy for seconds whatever it is sent, so there the
// signal seldom comes and the bound is what the press waits; and a click
// in a later call (an agent's next action, after the typing's settled
// screenshot) finds that time already gone and does not wait. Without an
// idle window the press goes on, and the batch says so.
func (d *device) sealKeys(ctx context.Context, mach desktop.Machine) error {
	bound := time.Until(d.keysSent.Add(d.s.cfg.KeyReaction))
	d.keysSent = time.Time{}
	if bound <= 0 {
		return nil
	}
	start := time.Now()
	idle, err := newCPUMeter(mach.VCPUTime).waitIdle(ctx, bound)
	batchOf(ctx).waited(time.Since(start))
	if err != nil || idle {
		return err
	}
	batchOf(ctx).warn(fmt.Sprintf("a button press followed keys while the desktop was still busy %s after them: it may reach the application before the last keys", d.s.cfg.KeyReaction))
	return nil
}

// syncKeys seals the pointer before keys that do not go through Send
// (text typed in the guest).
func (d *device) syncKeys(ctx context.Context) error {
	if !d.unread {
		return nil
	}
	mach, _, err := d.s.mgr.Machine(ctx, d.id, desktop.WaitNone)
	if err != nil {
		return err
	}
	return d.sealPointer(ctx, mach)
}

// nudge moves the pointer by one pixel and waits, at most timeout for
// each of two steps, until the screen shows the guest drew it: then the
// guest has read every pointer report sent before (QEMU's tablets queue
// them in order). The last move's redraw is waited for first, so
// it is not taken for the nudge's. drawn says which damage counts as a
// redraw at a point. It reports whether the nudge was seen; the wait
// counts in the batch's sync time.
func (d *device) nudge(ctx context.Context, mach desktop.Machine, timeout time.Duration, drawn func(input.Point) func([]image.Rectangle) bool) (bool, error) {
	scr, ok := d.s.screens.Screen(d.id)
	if !ok {
		return true, nil
	}
	start := time.Now()
	defer func() { batchOf(ctx).waited(time.Since(start)) }()
	if d.moved {
		if _, err := waitDamage(ctx, scr, d.moveCounter, timeout, drawn(d.pos)); err != nil {
			return false, err
		}
		d.moved = false
	}
	to := d.pos
	if sz, err := d.s.ScreenSize(d.id); err == nil && to.X+1 >= sz.X {
		to.X--
	} else {
		to.X++
	}
	before, _ := scr.Source().Changed()
	if err := mach.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: to.X, Y: to.Y}}); err != nil {
		return false, err
	}
	d.pos = to
	d.s.poke(d.id)
	return waitDamage(ctx, scr, before, timeout, drawn(to))
}

// anyChange counts any change of the screen as the pointer's redraw.
func anyChange(input.Point) func([]image.Rectangle) bool {
	return func([]image.Rectangle) bool { return true }
}

// pointerDrawn counts a redraw no larger than the pointer's, around p.
func pointerDrawn(p input.Point) func([]image.Rectangle) bool {
	area := image.Rect(p.X-pointerBox, p.Y-pointerBox, p.X+pointerBox, p.Y+pointerBox)
	return func(rects []image.Rectangle) bool {
		for _, r := range rects {
			if r.Overlaps(area) && r.Dx() <= pointerBox && r.Dy() <= pointerBox {
				return true
			}
		}
		return false
	}
}

// waitDamage waits, at most timeout, until the screen's damage since the
// counter since satisfies enough; without damage areas (a screen that
// does not keep them) any change does.
func waitDamage(ctx context.Context, scr Screen, since uint64, timeout time.Duration, enough func([]image.Rectangle) bool) (bool, error) {
	src := scr.Source()
	deadline := time.Now().Add(timeout)
	for {
		counter, _ := src.Changed()
		if counter > since {
			rects, ok := scr.Damage(since)
			if !ok || enough(rects) {
				return true, nil
			}
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false, nil
		}
		if _, err := screenshot.WaitChanged(ctx, src, counter, wait); err != nil {
			return false, err
		}
	}
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
//
// A guest still busy when the hold runs out has likely not got to the
// moves yet (TCG on a loaded host makes openbox's 1 to 2.5 s several
// times longer), so the hold goes on while its CPUs stay busy, at most
// DragBusyHold more. An idle guest that moved nothing will not move it
// later: the release goes then.
func (d *device) endDrag(ctx context.Context, mach desktop.Machine) error {
	if scr, ok := d.s.screens.Screen(d.id); ok {
		acted, err := waitDamage(ctx, scr, d.pressCounter, d.s.cfg.DragHold, beyondPointer)
		if err != nil {
			return err
		}
		if !acted {
			if err := d.holdWhileBusy(ctx, mach, scr); err != nil {
				return err
			}
		}
	}
	return sleepUntil(ctx, time.Now().Add(d.s.cfg.DragStep))
}

// holdWhileBusy waits, one idle window at a time and at most
// DragBusyHold, until the screen shows the drag acted on or the guest's
// CPUs go idle.
func (d *device) holdWhileBusy(ctx context.Context, mach desktop.Machine, scr Screen) error {
	cpu := newCPUMeter(mach.VCPUTime)
	deadline := time.Now().Add(d.s.cfg.DragBusyHold)
	for time.Now().Before(deadline) {
		idle, err := cpu.waitIdle(ctx, idleWindow)
		if err != nil || idle {
			return err
		}
		if acted, err := waitDamage(ctx, scr, d.pressCounter, 0, beyondPointer); err != nil || acted {
			return err
		}
	}
	batchOf(ctx).warn(fmt.Sprintf("a drag ended while the desktop was still busy %s after its last move, with nothing moved on the screen: it may have been lost", d.s.cfg.DragHold+d.s.cfg.DragBusyHold))
	return nil
}

// pointerBox bounds what redrawing the pointer damages on the screen (a
// cursor image of up to 32 pixels, rounded out to QEMU's 16-pixel VNC
// tiles, old and new position).
const pointerBox = 64

// pointerQuiet is how long the screen must stay unchanged for the
// pointer's redraw to count as finished: two of the mirror's pokes.
const pointerQuiet = 2 * screenshot.PokeInterval

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
	if wait := time.Until(t); wait > 0 {
		return sleepContext(ctx, wait)
	}
	return nil
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

func hasKeys(events []desktop.InputEvent) bool {
	for _, e := range events {
		if e.Kind == desktop.InputKey {
			return true
		}
	}
	return false
}

// pressesButton says whether a frame presses a pointer button (a wheel
// notch included).
func pressesButton(events []desktop.InputEvent) bool {
	for _, e := range events {
		if e.Kind == desktop.InputButton && e.Down {
			return true
		}
	}
	return false
}

// buttonFrame says whether a frame presses or releases a pointer button
// (wheel notches included: a scroll moves what keys would go to).
func buttonFrame(events []desktop.InputEvent) bool {
	for _, e := range events {
		if e.Kind == desktop.InputButton {
			return true
		}
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
