package drive

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// rfbMachine is a machine whose only working part is its VNC server: a
// scripted RFB 3.8 server with a 2x2 screen that sends one full frame when
// frame is closed.
type rfbMachine struct {
	desktop.Machine // nil: the screen only dials
	frame           chan struct{}
	shade           byte // added to every pixel's red
}

func (m *rfbMachine) DialVNC(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	go m.serve(server)
	return client, nil
}

func (m *rfbMachine) serve(c net.Conn) {
	defer c.Close()
	read := func(n int) error { _, err := io.ReadFull(c, make([]byte, n)); return err }
	// Version, security None, ClientInit.
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil || read(12) != nil {
		return
	}
	if _, err := c.Write([]byte{1, 1}); err != nil || read(1) != nil {
		return
	}
	if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil || read(1) != nil {
		return
	}
	init := []byte{0, 2, 0, 2, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0, 0, 0, 0, 1, 't'}
	if _, err := c.Write(init); err != nil {
		return
	}
	go io.Copy(io.Discard, c) // the client's requests
	<-m.frame
	fbu := []byte{0, 0, 0, 1}
	fbu = binary.BigEndian.AppendUint16(fbu, 0)
	fbu = binary.BigEndian.AppendUint16(fbu, 0)
	fbu = binary.BigEndian.AppendUint16(fbu, 2)
	fbu = binary.BigEndian.AppendUint16(fbu, 2)
	fbu = binary.BigEndian.AppendUint32(fbu, 0) // Raw
	for i := 0; i < 4; i++ {
		fbu = append(fbu, byte(60*i)+m.shade, 0, 0, 0)
	}
	c.Write(fbu)
	io.Copy(io.Discard, c)
}

func TestWaitFrameWaitsForTheScreenAndItsFirstFrame(t *testing.T) {
	ctx := t.Context()
	ss := NewMirrors(ctx, slog.New(slog.DiscardHandler))
	m := &rfbMachine{frame: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- ss.WaitFrame(ctx, "d-1") }()

	ss.MachineUp("d-1", m) // the screen appears after the wait began
	select {
	case err := <-done:
		t.Fatalf("WaitFrame returned %v before any frame", err)
	case <-time.After(50 * time.Millisecond): // a negative check: it keeps waiting
	}
	close(m.frame)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitFrame: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitFrame did not return after the first frame")
	}
	ss.Forget("d-1")
}

func TestWaitFrameEndsWithItsContext(t *testing.T) {
	ss := NewMirrors(t.Context(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := ss.WaitFrame(ctx, "d-never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFrame for a screen that never comes: %v, want the deadline", err)
	}
	if gate := (*Mirrors)(nil).RefillGate(); gate != nil {
		t.Fatal("a nil Screens must give no refill gate")
	}
}

// poolMachine is an rfbMachine that counts its VNC connections and can end.
type poolMachine struct {
	rfbMachine
	dials  atomic.Int32
	exited chan struct{}
}

func newPoolMachine() *poolMachine {
	m := &poolMachine{rfbMachine: rfbMachine{frame: make(chan struct{})}, exited: make(chan struct{})}
	close(m.frame) // the full frame comes at once
	return m
}

func (m *poolMachine) DialVNC(ctx context.Context) (net.Conn, error) {
	m.dials.Add(1)
	return m.rfbMachine.DialVNC(ctx)
}

func (m *poolMachine) Exited() <-chan struct{} { return m.exited }

func (ss *Mirrors) pooledCount() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.pooled)
}

func TestAPoolMachinesPaintedConnectionServesTheDesktopThatTakesIt(t *testing.T) {
	ctx := t.Context()
	ss := NewMirrors(ctx, slog.New(slog.DiscardHandler))
	warm := ss.Warmup(nil)
	ready := func(s *Mirror) {
		t.Helper()
		select {
		case <-s.Ready():
		case <-time.After(10 * time.Second):
			t.Fatal("the screen has no frame")
		}
	}

	// Warmed, then taken by a new desktop: its screen is painted on the
	// connection the warm-up made.
	taken := newPoolMachine()
	if err := warm(ctx, taken, desktop.Snapshot{}); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	ss.MachineUp("d-1", taken)
	s, ok := ss.Get("d-1")
	if !ok {
		t.Fatal("no screen for the desktop that took the machine")
	}
	ready(s)
	if n := taken.dials.Load(); n != 1 {
		t.Errorf("%d VNC connections to the taken machine, want the warm-up's one", n)
	}

	// A reset's new machine: the desktop keeps its screen, which goes on
	// on the new machine's painted connection.
	next := newPoolMachine()
	next.shade = 1
	if err := warm(ctx, next, desktop.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	ss.MachineUp("d-1", next)
	if again, _ := ss.Get("d-1"); again != s {
		t.Error("a reset replaced the desktop's screen")
	}
	if !testenv.Poll(10*time.Second, time.Millisecond, 50*time.Millisecond, func() bool {
		img, _ := s.Mirror.Frame(nil)
		return img != nil && int(img.Pix[0])+int(img.Pix[1])+int(img.Pix[2]) == 1 // the first pixel, shade 1
	}) {
		t.Fatal("the screen does not show the reset's machine")
	}
	if n := next.dials.Load(); n != 1 {
		t.Errorf("%d VNC connections to the reset's machine, want the warm-up's one", n)
	}
	if n := ss.pooledCount(); n != 0 {
		t.Errorf("%d painted connections kept after their machines were taken, want 0", n)
	}

	// A pool machine nobody takes: its connection ends with it.
	unused := newPoolMachine()
	if err := warm(ctx, unused, desktop.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	close(unused.exited)
	if !testenv.Poll(10*time.Second, time.Millisecond, 50*time.Millisecond, func() bool { return ss.pooledCount() == 0 }) {
		t.Error("the connection of a pool machine that ended is still kept")
	}

	// Turned off: the warm-up makes no connection.
	ss.SetPrewarm(false)
	off := newPoolMachine()
	if err := warm(ctx, off, desktop.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if n := off.dials.Load(); n != 0 || ss.pooledCount() != 0 {
		t.Errorf("prewarm off: %d connections, %d kept; want none", n, ss.pooledCount())
	}
	ss.Forget("d-1")
}
