package vnc

import (
	"context"
	"fmt"
)

// Painted is a connection made ahead of need: handshaken, and holding a
// complete frame of the screen. A Mirror takes it over with Offer and
// publishes that frame at once, instead of dialing, handshaking and waiting
// for QEMU's first full update (about 80 ms of a warm-pool create under
// TCG). Until then nothing reads it: no update is asked for, so the server
// sends nothing but the odd unasked message, which waits in the socket, and
// the server keeps track of what changes meanwhile; the Mirror's first
// incremental request brings it.
type Painted struct {
	c *Client
}

// Paint dials (opts.Dial), handshakes and reads until the whole screen has
// arrived once.
func Paint(ctx context.Context, opts MirrorOptions) (*Painted, error) {
	opts = opts.withDefaults()
	hctx, cancel := context.WithTimeout(ctx, opts.HandshakeTimeout)
	c, err := connect(hctx, opts)
	cancel()
	if err != nil {
		return nil, err
	}
	if err := paintFirstFrame(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return &Painted{c: c}, nil
}

// paintFirstFrame asks for the whole screen and reads until every pixel of
// it came; after a resize, the whole screen at the new size.
func paintFirstFrame(ctx context.Context, c *Client) error {
	cov := newCoverage(c.Framebuffer().Rect.Size())
	if err := c.RequestUpdate(ctx, false, c.Framebuffer().Rect.Size()); err != nil {
		return err
	}
	for !cov.complete() {
		msg, err := c.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("read the first frame: %w", err)
		}
		u, ok := msg.(*FramebufferUpdate)
		if !ok {
			continue
		}
		if u.Resized {
			cov = newCoverage(c.Framebuffer().Rect.Size())
		}
		for _, r := range u.Damage {
			cov.mark(r)
		}
		if cov.complete() {
			return nil
		}
		if u.ExtendedKeyEvents {
			// As in a Mirror's session: QEMU's refresh timer may have
			// slowed down; a no-op key release makes it fire now.
			if err := c.SendQEMUKey(ctx, false, 0, 0); err != nil {
				return err
			}
		}
		if err := c.RequestUpdate(ctx, !u.Resized, c.Framebuffer().Rect.Size()); err != nil {
			return err
		}
	}
	return nil
}

// Close ends a painted connection no Mirror took.
func (p *Painted) Close() error { return p.c.Close() }

// Offer hands the Mirror a painted connection: it drops the connection it
// has (or its wait to redial) and carries on with this one. A connection
// offered before Run is the first one Run uses. A later offer replaces one
// not yet taken, which is closed, as is one still untaken when Run ends.
func (m *Mirror) Offer(p *Painted) {
	m.mu.Lock()
	old, cur, cancelDial := m.offered, m.client, m.cancelDial
	m.offered = p
	m.mu.Unlock()
	if cancelDial != nil {
		cancelDial() // a dial in progress gives way
	}
	if old != nil {
		old.Close()
	}
	if cur != nil {
		cur.Close() // ends the session's read; Run takes the offer next
	}
	m.Reconnect() // ends a wait to redial
}

// takeOffered returns the connection offered and not yet taken, if any.
func (m *Mirror) takeOffered() *Painted {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.offered
	m.offered = nil
	return p
}

func (m *Mirror) hasOffer() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered != nil
}
