package input

import "context"

// EventKind says what a low-level Event does.
type EventKind int

const (
	// KeyEvent presses or releases one key, named by its QEMU qcode.
	KeyEvent EventKind = iota + 1
	// ButtonEvent presses or releases one pointer button.
	ButtonEvent
	// MoveEvent moves the pointer to an absolute native pixel position.
	MoveEvent
)

// Event is one low-level input event, in the vocabulary of QEMU's
// input-send-event: keys by qcode, buttons by QEMU's InputButton names
// (left, middle, right, wheel-up, wheel-down, wheel-left, wheel-right, side,
// extra), absolute moves in native framebuffer pixels.
type Event struct {
	Kind   EventKind
	Key    string // qcode, for KeyEvent ("a", "shift", "ret", "kp_0", ...)
	Button string // for ButtonEvent
	Down   bool   // for KeyEvent and ButtonEvent
	X, Y   int    // for MoveEvent, native pixels
}

// Device delivers low-level input to a desktop. Each call is one
// synchronised frame: the guest sees all its events together, so a click is
// two calls (press, then release), never one.
type Device interface {
	Send(ctx context.Context, events []Event) error
}
