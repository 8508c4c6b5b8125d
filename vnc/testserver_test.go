package vnc

import (
	"bufio"
	"context"
	"crypto/des"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testServer is a small scripted RFB 3.8 server for unit tests. Its
// handshake and message framing are written out by hand from RFC 6143, not
// shared with the code under test. Each accepted connection is a
// testServerConn that records the client's messages and sends whatever the
// test writes.
type testServer struct {
	t        testing.TB
	ln       net.Listener
	path     string
	width    int
	height   int
	name     string
	password string
	conns    chan *testServerConn
}

type testServerOptions struct {
	width, height int
	name          string
	password      string
}

func newTestServer(t testing.TB, opts testServerOptions) *testServer {
	t.Helper()
	if opts.width == 0 {
		opts.width, opts.height = 64, 48
	}
	if opts.name == "" {
		opts.name = "test desktop"
	}
	path := filepath.Join(t.TempDir(), "vnc.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &testServer{
		t: t, ln: ln, path: path,
		width: opts.width, height: opts.height, name: opts.name, password: opts.password,
		conns: make(chan *testServerConn, 16),
	}
	go s.acceptLoop()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *testServer) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", s.path)
}

func (s *testServer) acceptLoop() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		tc := &testServerConn{
			conn:   conn,
			r:      bufio.NewReader(conn),
			msgs:   make(chan []byte, 4096),
			closed: make(chan struct{}),
			width:  s.width, height: s.height,
		}
		go tc.serve(s)
	}
}

// accept waits for the next client that completed the handshake.
func (s *testServer) accept(t testing.TB) *testServerConn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { c.conn.Close() })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no client connected to the test server within 10s")
		return nil
	}
}

type testServerConn struct {
	conn          net.Conn
	r             *bufio.Reader
	shared        byte
	width, height int
	msgs          chan []byte
	closed        chan struct{}
	err           error // why reading stopped, set before closed is closed
	wmu           sync.Mutex
}

func (c *testServerConn) serve(s *testServer) {
	if err := c.handshake(s); err != nil {
		c.conn.Close()
		return
	}
	s.conns <- c
	defer close(c.closed)
	for {
		msg, err := c.readClientMessage()
		if err != nil {
			c.err = err
			return
		}
		select {
		case c.msgs <- msg:
		default:
			c.err = errors.New("test server: client message buffer full")
			return
		}
	}
}

var testChallenge = []byte("0123456789abcdef")

func (c *testServerConn) handshake(s *testServer) error {
	if _, err := c.conn.Write([]byte("RFB 003.008\n")); err != nil {
		return err
	}
	ver := make([]byte, 12)
	if _, err := io.ReadFull(c.r, ver); err != nil {
		return err
	}
	if string(ver) != "RFB 003.008\n" {
		return fmt.Errorf("client version %q", ver)
	}
	sec := byte(1)
	if s.password != "" {
		sec = 2
	}
	c.conn.Write([]byte{1, sec})
	choice := make([]byte, 1)
	if _, err := io.ReadFull(c.r, choice); err != nil {
		return err
	}
	if choice[0] != sec {
		return fmt.Errorf("client chose %d", choice[0])
	}
	if sec == 2 {
		c.conn.Write(testChallenge)
		resp := make([]byte, 16)
		if _, err := io.ReadFull(c.r, resp); err != nil {
			return err
		}
		if string(resp) != string(testDESResponse(testChallenge, s.password)) {
			reason := "Authentication failed"
			b := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 1}, uint32(len(reason)))
			c.conn.Write(append(b, reason...))
			return errors.New("wrong password")
		}
	}
	c.conn.Write([]byte{0, 0, 0, 0})
	if _, err := io.ReadFull(c.r, choice); err != nil {
		return err
	}
	c.shared = choice[0]
	// ServerInit with QEMU's natural format: 32 bpp, depth 24, BGRX.
	b := binary.BigEndian.AppendUint16(nil, uint16(c.width))
	b = binary.BigEndian.AppendUint16(b, uint16(c.height))
	b = append(b, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.name)))
	b = append(b, s.name...)
	_, err := c.conn.Write(b)
	return err
}

// testDESResponse is VNC Authentication done independently of vncauth.go.
func testDESResponse(challenge []byte, password string) []byte {
	key := make([]byte, 8)
	copy(key, password)
	for i := range key {
		key[i] = bits.Reverse8(key[i])
	}
	block, _ := des.NewCipher(key)
	out := make([]byte, 16)
	block.Encrypt(out[:8], challenge[:8])
	block.Encrypt(out[8:], challenge[8:])
	return out
}

// readClientMessage frames the client messages that Client and the proxy
// tests send.
func (c *testServerConn) readClientMessage() ([]byte, error) {
	t, err := c.r.Peek(1)
	if err != nil {
		return nil, err
	}
	var n int
	switch t[0] {
	case 0:
		n = 20
	case 2:
		h, err := c.r.Peek(4)
		if err != nil {
			return nil, err
		}
		n = 4 + 4*int(binary.BigEndian.Uint16(h[2:]))
	case 3:
		n = 10
	case 4:
		n = 8
	case 5:
		n = 6
	case 6:
		h, err := c.r.Peek(8)
		if err != nil {
			return nil, err
		}
		n = 8 + int(binary.BigEndian.Uint32(h[4:]))
	case 255:
		n = 12
	default:
		return nil, fmt.Errorf("test server: client message type %d", t[0])
	}
	msg := make([]byte, n)
	_, err = io.ReadFull(c.r, msg)
	return msg, err
}

// next returns the client's next message, failing the test after 10s.
func (c *testServerConn) next(t testing.TB) []byte {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-c.closed:
		select {
		case m := <-c.msgs:
			return m
		default:
		}
		t.Fatalf("client connection ended: %v", c.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no client message within 10s")
	}
	return nil
}

// nextOfType skips messages until one of type typ.
func (c *testServerConn) nextOfType(t testing.TB, typ byte) []byte {
	t.Helper()
	for {
		if m := c.next(t); m[0] == typ {
			return m
		}
	}
}

// waitClosed waits until the client hangs up.
func (c *testServerConn) waitClosed(t testing.TB) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("client did not hang up within 10s")
	}
}

func (c *testServerConn) send(t testing.TB, b []byte) {
	t.Helper()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.conn.Write(b); err != nil {
		t.Fatalf("test server write: %v", err)
	}
}

// Server message builders.

func wireFBU(rects ...[]byte) []byte {
	b := []byte{0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(rects)))
	for _, r := range rects {
		b = append(b, r...)
	}
	return b
}

func wireRect(x, y, w, h int, enc Encoding, payload ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(x))
	b = binary.BigEndian.AppendUint16(b, uint16(y))
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = binary.BigEndian.AppendUint32(b, uint32(enc))
	return append(b, payload...)
}

// wireRawRect is a Raw rectangle of one colour, in the BGRX format the
// client sets (X left 0 as QEMU leaves it).
func wireRawRect(x, y, w, h int, r, g, b byte) []byte {
	pix := make([]byte, 0, w*h*4)
	for range w * h {
		pix = append(pix, b, g, r, 0)
	}
	return wireRect(x, y, w, h, EncodingRaw, pix...)
}

var wireExtKeyAck = wireFBU(wireRect(0, 0, 64, 48, EncodingQEMUExtendedKeyEvent))
