package input

import (
	"context"

	"github.com/warmdesk/warmdesk/desktop"
)

// Device delivers low-level input to a desktop, in the vocabulary of QEMU's
// input-send-event (desktop.InputEvent): keys by qcode, buttons by QEMU's
// InputButton names (left, middle, right, wheel-up, wheel-down, wheel-left,
// wheel-right, side, extra), absolute moves in native framebuffer pixels.
// Each call is one synchronised frame: the guest sees all its events
// together, so a click is two calls (press, then release), never one.
type Device interface {
	Send(ctx context.Context, events []desktop.InputEvent) error
}
