package vnc

import (
	"context"
	"image"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLogger sends slog output to t.Log until the test ends.
func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// waitClosed fails the test unless ch closes within d.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// waitChange waits for the mirror's counter to pass after, calling Poke
// every 10 ms as screenshot waiters do.
func waitChange(t testing.TB, m *Mirror, after uint64, d time.Duration) uint64 {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n, ch := m.Changed()
		if n > after {
			return n
		}
		select {
		case <-ch:
		case <-tick.C:
			m.Poke()
		case <-deadline:
			t.Fatalf("mirror counter stayed at %d for %v", n, d)
		}
	}
}

// runMirror runs m until the test ends.
func runMirror(t testing.TB, m *Mirror) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("mirror Run did not return after cancel")
		}
	})
}

func solid(w, h int, r, g, b byte) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = r, g, b, 255
	}
	return img
}

func sameImage(a, b *image.RGBA) bool {
	if a.Rect.Size() != b.Rect.Size() {
		return false
	}
	w := a.Rect.Dx() * 4
	for y := 0; y < a.Rect.Dy(); y++ {
		ra := a.Pix[y*a.Stride : y*a.Stride+w]
		rb := b.Pix[y*b.Stride : y*b.Stride+w]
		if string(ra) != string(rb) {
			return false
		}
	}
	return true
}

// dialTCPViewer connects to a TCP listener as a VNC viewer would.
func dialTCPViewer(addr, password string) (net.Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := clientHandshake(conn, conn, password, Limits{}.withDefaults()); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}
