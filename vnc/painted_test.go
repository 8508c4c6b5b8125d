package vnc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// paintAhead paints a connection to srv in the background, answering as
// the server with one full frame of a colour.
func paintAhead(t *testing.T, srv *testServer, r, g, b byte) *Painted {
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
	c.send(t, wireFBU(wireRawRect(0, 0, srv.width, srv.height, r, g, b)))
	res := <-done
	if res.err != nil {
		t.Fatalf("Paint: %v", res.err)
	}
	// Nothing more is asked for until a Mirror takes it.
	return res.p
}

func TestMirrorStartsOnAPaintedConnectionWithoutDialing(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	p := paintAhead(t, srv, 5, 6, 7)
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
}

func TestMirrorOfferReplacesTheLiveConnection(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c1 := startMirror(t, srv, MirrorOptions{})
	paint(t, c1, 64, 48, 1, 1, 1)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")

	p := paintAhead(t, srv, 9, 9, 9)
	// The painted connection's own server side: the next accepted after
	// c1 was the one paintAhead answered; it gets the mirror's request.
	m.Offer(p)
	c1.waitClosed(t)
	waitChange(t, m, 1, 10*time.Second)
	if img, _ := m.Frame(nil); !sameImage(img, solid(64, 48, 9, 9, 9)) {
		t.Fatal("the mirror does not show the offered connection's frame")
	}
}
