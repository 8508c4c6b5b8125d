package vnc

import (
	"fmt"
	"io"
)

// DesktopSize (RFC 6143 section 7.8.2) is handled by decoder.resize. This is
// rfbproto's ExtendedDesktopSize: x is the reason, y the status, w and h the
// size, then a screen count, 3 bytes of padding and 16 bytes per screen.
// QEMU sends it after every non-incremental update request, with the current
// size, when the client advertised it.

const screenLen = 16

func (d *decoder) readExtendedDesktopSize(h rectHeader) error {
	b := d.hdr[:4]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return fmt.Errorf("read screen count: %w", err)
	}
	// At most 255 screens of 16 bytes: bounded by the field's size.
	if _, err := d.r.Discard(int(b[0]) * screenLen); err != nil {
		return fmt.Errorf("read screens: %w", err)
	}
	if status := h.y; status != 0 {
		// A refused resize request: the size stays as it is.
		return nil
	}
	return d.resize(h.w, h.h)
}
