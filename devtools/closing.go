package devtools

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
)

// CloseGoingAway is the WebSocket close code (RFC 6455, 1001) a client gets
// when its DevTools connection ends because the desktop went away: reset,
// hibernated, deleted, or its Chromium ended.
const CloseGoingAway = 1001

// maxCloseReason is the longest reason a close frame carries: a control
// frame's payload is at most 125 bytes, two of them the code.
const maxCloseReason = 123

// WithCloseReason wraps the Chromium side of a proxied DevTools WebSocket
// (the connection an upgrade request went out on) so that when it ends
// between two of Chromium's frames, the client reads a close frame with
// reason() instead of a bare end of its connection, which Playwright and
// Puppeteer report as code 1006 with nothing said. A response that is not a
// switch to WebSocket, an end in the middle of a frame, and an end after
// Chromium's own close frame pass through unchanged.
func WithCloseReason(conn net.Conn, reason func() string) net.Conn {
	return &closingConn{Conn: conn, reason: reason}
}

type closingConn struct {
	net.Conn
	reason func() string

	mu      sync.Mutex
	frames  frameTracker
	pending []byte // the close frame still to be read
	ended   error  // the end to report once pending is read
}

func (c *closingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if c.ended != nil {
		return 0, c.ended
	}
	n, err := c.Conn.Read(p)
	c.frames.feed(p[:n])
	if err == nil {
		return n, nil
	}
	c.ended = err
	if c.frames.endsCleanly() {
		c.pending = closeFrame(CloseGoingAway, c.reason())
	}
	if n > 0 || len(c.pending) > 0 {
		m := copy(p[n:], c.pending)
		c.pending = c.pending[m:]
		return n + m, nil
	}
	return 0, err
}

// closeFrame is an unmasked (server to client) close frame.
func closeFrame(code uint16, reason string) []byte {
	if len(reason) > maxCloseReason {
		reason = reason[:maxCloseReason]
	}
	f := []byte{0x88, byte(2 + len(reason)), byte(code >> 8), byte(code)}
	return append(f, reason...)
}

// frameTracker follows a server's side of a WebSocket upgrade, the HTTP
// response and then the frames, to know whether the stream is between
// frames.
type frameTracker struct {
	// head holds the response's head until its blank line; after it, the
	// status decides: 101 follows frames, anything else passes through.
	head     []byte
	switched bool
	passThru bool
	header   []byte // the frame header read so far
	payload  uint64 // payload bytes of the current frame still to come
	sawClose bool
}

// maxHead bounds the response head the tracker keeps: Chromium's is a few
// hundred bytes; a longer one is not followed.
const maxHead = 8 << 10

func (t *frameTracker) feed(p []byte) {
	for len(p) > 0 && !t.passThru {
		if !t.switched {
			t.head = append(t.head, p...)
			i := bytes.Index(t.head, []byte("\r\n\r\n"))
			if i < 0 {
				if len(t.head) > maxHead {
					t.passThru = true
				}
				return
			}
			rest := t.head[i+4:]
			if i > maxHead || !bytes.HasPrefix(t.head, []byte("HTTP/1.1 101 ")) {
				t.passThru = true
				return
			}
			t.switched = true
			p = append([]byte(nil), rest...)
			t.head = nil
			continue
		}
		if t.payload > 0 {
			skip := uint64(len(p))
			if skip > t.payload {
				skip = t.payload
			}
			t.payload -= skip
			p = p[skip:]
			continue
		}
		// A frame header: 2 bytes, then 0, 2 or 8 of length, then 4 of
		// mask when masked.
		t.header = append(t.header, p[0])
		p = p[1:]
		need, ok := headerLen(t.header)
		if !ok || len(t.header) < need {
			continue
		}
		if t.header[0]&0x0f == 0x8 {
			t.sawClose = true
		}
		t.payload = payloadLen(t.header)
		t.header = t.header[:0]
	}
}

// endsCleanly says whether an end now falls between two frames of a
// WebSocket that Chromium did not close itself.
func (t *frameTracker) endsCleanly() bool {
	return t.switched && !t.passThru && !t.sawClose && len(t.header) == 0 && t.payload == 0
}

// headerLen is the length of the frame header h starts, once h holds
// enough of it to say (ok).
func headerLen(h []byte) (n int, ok bool) {
	if len(h) < 2 {
		return 0, false
	}
	n = 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n, true
}

// payloadLen reads the payload length of a complete frame header.
func payloadLen(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(l)
	}
}
