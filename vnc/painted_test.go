package vnc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// paintAhead paints a connection to srv in the background, answering as
// QEMU does: the extended key events acknowledged (Paint pokes and asks
// again), then one full frame of a colour. It returns the server's side.
func paintAhead(t *testing.T, srv *testServer, r, g, b byte) (*Painted, *testServerConn) {
	t.Helper()
	type result struct {
		p   *Painted
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := Paint(t.Context(), MirrorOptions{Dial: srv.dial})
		done <- result{p, err}
	}()
	c := srv.accept(t)
	expectOpening(t, c, srv.width, srv.height)
	c.send(t, wireExtKeyAck)
	if m := c.next(t); !bytes.Equal(m, wireQEMUKeyUpZero) {
		t.Fatalf("after the acknowledgement Paint sent %x, want a poke", m)
	}
	expectIncremental(t, c, srv.width, srv.height)
	c.send(t, wireFBU(wireRawRect(0, 0, srv.width, srv.height, r, g, b)))
	res := <-done
	if res.err != nil {
		t.Fatalf("Paint: %v", res.err)
	}
	// Nothing more is asked for until a Mirror takes it.
	return res.p, c
}

func TestMirrorStartsOnAPaintedConnectionWithoutDialing(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	p, c := paintAhead(t, srv, 5, 6, 7)
	var dials atomic.Int32
	m := NewMirror(MirrorOptions{Logger: testLogger(t), Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("no dialing expected")
	}})
	m.Offer(p)
	runMirror(t, m)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")
	if img, n := m.Frame(nil); n != 1 || !sameImage(img, solid(64, 48, 5, 6, 7)) {
		t.Fatalf("frame %d is not the painted one", n)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d dials, want none", n)
	}
	// It asks for what changed since the painting, and pokes QEMU's
	// refresh timer, which slowed down while nobody asked.
	expectIncremental(t, c, 64, 48)
	if msg := c.next(t); !bytes.Equal(msg, wireQEMUKeyUpZero) {
		t.Fatalf("after the hand-over the mirror sent %x, want a poke", msg)
	}
	c.send(t, wireFBU(wireRawRect(0, 0, 64, 8, 1, 2, 3)))
	waitChange(t, m, 1, 10*time.Second)
}

func TestMirrorOfferReplacesTheLiveConnection(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	var dials atomic.Int32
	m, c1 := startMirror(t, srv, MirrorOptions{Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return srv.dial(ctx)
	}})
	paint(t, c1, 64, 48, 1, 1, 1)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")

	p, c2 := paintAhead(t, srv, 9, 9, 9)
	m.Offer(p)
	c1.waitClosed(t)
	expectIncremental(t, c2, 64, 48) // the mirror goes on on the painted connection
	waitChange(t, m, 1, 10*time.Second)
	if img, _ := m.Frame(nil); !sameImage(img, solid(64, 48, 9, 9, 9)) {
		t.Fatal("the mirror does not show the offered connection's frame")
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the mirror dialed %d times, want only its first connection", n)
	}
}
