package vnc

import (
	"context"
	"time"
)

// The Mirror's client-to-server side: Poke and the input senders, safe for
// concurrent use with the reader.

// Poke asks QEMU to look for changes now. QEMU's VNC refresh interval grows
// from 30 ms to 3 s while the screen is idle, and any client message of type
// greater than 3 resets it (ui/vnc.c, protocol_client_msg). Poke sends QEMU's
// extended key event releasing keycode 0, a key that is never down, which
// QEMU's keyboard state drops before the guest sees it (ui/kbd-state.c). It
// never blocks, and sends at most one message per 10 ms however often it is
// called.
func (m *Mirror) Poke() {
	now := int64(time.Since(m.epoch))
	last := m.lastPoke.Load()
	if now-last < int64(pokeInterval) || !m.lastPoke.CompareAndSwap(last, now) {
		return
	}
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

func (m *Mirror) pokeLoop(ctx context.Context, c *Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.poke:
			if !c.ExtendedKeyEvents() {
				continue // not QEMU, or not yet acknowledged: nothing to poke
			}
			if err := c.SendQEMUKey(ctx, false, 0, 0); err != nil {
				m.log.Debug("vnc mirror poke failed", "err", err)
				return
			}
		}
	}
}

func (m *Mirror) currentClient() (*Client, error) {
	m.mu.Lock()
	c := m.client
	m.mu.Unlock()
	if c == nil {
		return nil, ErrNotConnected
	}
	return c, nil
}

// SendPointer sends a PointerEvent: button mask (bit 0 left, 1 middle,
// 2 right, 3/4 wheel up/down) and position in framebuffer pixels.
func (m *Mirror) SendPointer(ctx context.Context, buttons uint8, x, y int) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendPointer(ctx, buttons, x, y)
}

// SendKey sends a KeyEvent for an X keysym, mapped by QEMU's keymap.
func (m *Mirror) SendKey(ctx context.Context, down bool, keysym uint32) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendKey(ctx, down, keysym)
}

// SendQEMUKey sends QEMU's extended key event with an XT keycode, which
// bypasses keymaps.
func (m *Mirror) SendQEMUKey(ctx context.Context, down bool, keysym, keycode uint32) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendQEMUKey(ctx, down, keysym, keycode)
}

// SendCutText sets the server's clipboard (ISO 8859-1; other characters
// become '?').
func (m *Mirror) SendCutText(ctx context.Context, text string) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendCutText(ctx, text)
}
