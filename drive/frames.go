package drive

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// inputDevice delivers low-level input to a desktop, in the vocabulary of
// QEMU's input-send-event (desktop.InputEvent): keys by qcode, buttons by
// QEMU's InputButton names (left, middle, right, wheel-up, wheel-down,
// wheel-left, wheel-right, side, extra), absolute moves in native
// framebuffer pixels. Each call is one synchronised frame: the guest sees
// all its events together, so a click is two calls (press, then release),
// never one. device (device.go) implements it.
type inputDevice interface {
	Send(ctx context.Context, events []desktop.InputEvent) error
}

// withModifiers holds mods down around body and always releases them.
func (r *runner) withModifiers(ctx context.Context, mods input.Chord, body func() error) error {
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
func (r *runner) releaseButtons(ctx context.Context) error {
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
func (r *runner) releaseKeys(ctx context.Context, keys input.Chord) error {
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	return r.keyFrame(rctx, keyEvents(reversed(keys), false))
}

// releaseContext is what a release runs in. While the request lives the
// release is a step of its action, held to the request's own deadline: a
// timer of its own once ended keystrokes (a modifier's release on a busy
// guest, which the key gate holds until the guest read the press) with
// "context deadline exceeded". After the request ended, releaseTimeout
// bounds letting go of what is still held.
func (r *runner) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), r.releaseTimeout)
}

// releaseAll releases every held key and button, even after ctx has ended.
func (r *runner) releaseAll(ctx context.Context) error {
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

func (r *runner) moveTo(ctx context.Context, at *input.Point) error {
	if at == nil {
		return nil
	}
	return r.send(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: at.X, Y: at.Y}})
}

func (r *runner) button(ctx context.Context, button string, down bool) error {
	return r.send(ctx, []desktop.InputEvent{{Kind: desktop.InputButton, Button: button, Down: down}})
}

func (r *runner) drag(ctx context.Context, s input.Step) error {
	path := s.Path
	if len(path) > 1 {
		if err := r.moveTo(ctx, &path[0]); err != nil {
			return err
		}
		path = path[1:]
	}
	if err := r.button(ctx, s.Button, true); err != nil {
		return err
	}
	for i := range path {
		if err := r.moveTo(ctx, &path[i]); err != nil {
			return err
		}
	}
	return r.button(ctx, s.Button, false)
}

// keystroke presses and releases k: in one frame when it fits QEMU's PS/2
// queue, else as a press frame and a release frame.
func (r *runner) keystroke(ctx context.Context, k input.Keystroke) error {
	if fitsOneFrame(k) {
		return r.keyFrame(ctx, append(keyEvents(input.Chord(k), true), keyEvents(reversed(input.Chord(k)), false)...))
	}
	if err := r.keyFrame(ctx, keyEvents(input.Chord(k), true)); err != nil {
		return err
	}
	return r.releaseKeys(ctx, input.Chord(k))
}

// keyFrame sends a keyboard frame no sooner than KeystrokeInterval after the
// previous one: the typing rate.
func (r *runner) keyFrame(ctx context.Context, events []desktop.InputEvent) error {
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
func (r *runner) send(ctx context.Context, events []desktop.InputEvent) error {
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
			r.pos, r.posKnown = input.Point{X: e.X, Y: e.Y}, err == nil
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

// ps2Bytes estimates the PS/2 scancode set 2 bytes of pressing and releasing
// a qcode: 1 + 2 for most keys, 2 + 3 for the E0-prefixed ones, more for
// Print and Pause.
func ps2Bytes(qcode string) int {
	switch qcode {
	case "print":
		return 10
	case "pause":
		return 8
	case "ctrl_r", "alt_r", "meta_l", "meta_r", "compose", "menu", "insert", "delete",
		"home", "end", "pgup", "pgdn", "left", "right", "up", "down", "kp_divide", "kp_enter",
		"power", "sleep", "wake", "audionext", "audioprev", "audiostop", "audioplay",
		"audiomute", "volumeup", "volumedown", "mediaselect", "mail", "calculator",
		"computer", "ac_home", "ac_back", "ac_forward", "ac_refresh", "ac_bookmarks":
		return 5
	}
	return 3
}

// ps2QueueBytes is the size of QEMU's PS/2 keyboard queue. A frame that
// would overflow it loses keys, so fitsOneFrame splits such keystrokes.
const ps2QueueBytes = 16

// fitsOneFrame reports whether the press and release of the whole keystroke
// fit in the PS/2 queue at once.
func fitsOneFrame(k input.Keystroke) bool {
	n := 0
	for _, q := range k {
		n += ps2Bytes(q)
	}
	return n <= ps2QueueBytes
}
