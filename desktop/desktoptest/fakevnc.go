package desktoptest

import (
	"encoding/binary"
	"io"
	"net"
)

// serveRFB is the fake's VNC server: RFB 3.8 with no security (RFC 6143),
// a 32-bit BGRX screen like QEMU's, and raw frames of the fake screen for
// every non-incremental FramebufferUpdateRequest (the fake screen changes
// only with input, so incremental requests get nothing until then: the
// server owes no answer before a change). SetPixelFormat is read and not
// honoured: the fake speaks only its own format.
func (m *FakeMachine) serveRFB(c net.Conn) {
	defer c.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // the machine's end ends its connections
		select {
		case <-m.exited:
			c.Close()
		case <-done:
		}
	}()
	discard := func(n int) error { _, err := io.CopyN(io.Discard, c, int64(n)); return err }
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil || discard(12) != nil {
		return
	}
	if _, err := c.Write([]byte{1, 1}); err != nil || discard(1) != nil { // security: None
		return
	}
	if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil || discard(1) != nil { // OK; ClientInit
		return
	}
	m.mu.Lock()
	w, h := m.screen()
	m.mu.Unlock()
	init := binary.BigEndian.AppendUint16(nil, uint16(w))
	init = binary.BigEndian.AppendUint16(init, uint16(h))
	// 32 bits per pixel, depth 24, little-endian, true colour, 8 bits a
	// channel, red at bit 16, green at 8, blue at 0.
	init = append(init, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0)
	init = binary.BigEndian.AppendUint32(init, 4)
	init = append(init, "fake"...)
	if _, err := c.Write(init); err != nil {
		return
	}
	var typ [1]byte
	for {
		if _, err := io.ReadFull(c, typ[:]); err != nil {
			return
		}
		var err error
		switch typ[0] {
		case 0: // SetPixelFormat
			err = discard(19)
		case 2: // SetEncodings
			var hdr [3]byte
			if _, err = io.ReadFull(c, hdr[:]); err == nil {
				err = discard(4 * int(binary.BigEndian.Uint16(hdr[1:])))
			}
		case 3: // FramebufferUpdateRequest
			var req [9]byte
			if _, err = io.ReadFull(c, req[:]); err == nil && req[0] == 0 {
				err = m.sendFrame(c)
			}
		case 4: // KeyEvent
			err = discard(7)
		case 5: // PointerEvent
			err = discard(5)
		case 6: // ClientCutText
			var hdr [7]byte
			if _, err = io.ReadFull(c, hdr[:]); err == nil {
				err = discard(int(binary.BigEndian.Uint32(hdr[3:])))
			}
		default:
			return // unknown to RFB 3.8: the stream cannot be followed
		}
		if err != nil {
			return
		}
	}
}

// sendFrame writes the whole fake screen as one raw rectangle.
func (m *FakeMachine) sendFrame(w io.Writer) error {
	m.mu.Lock()
	img := m.picture()
	m.mu.Unlock()
	b := img.Bounds()
	msg := []byte{0, 0, 0, 1, 0, 0, 0, 0}
	msg = binary.BigEndian.AppendUint16(msg, uint16(b.Dx()))
	msg = binary.BigEndian.AppendUint16(msg, uint16(b.Dy()))
	msg = binary.BigEndian.AppendUint32(msg, 0) // raw
	px := make([]byte, 0, 4*b.Dx()*b.Dy())
	for i := 0; i < len(img.Pix); i += 4 {
		px = append(px, img.Pix[i+2], img.Pix[i+1], img.Pix[i], 0)
	}
	_, err := w.Write(append(msg, px...))
	return err
}
