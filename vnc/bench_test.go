package vnc

import (
	"bufio"
	"bytes"
	"image"
	"io"
	"testing"
	"time"
)

const benchW, benchH = 1280, 800

// repeatReader replays stream forever.
type repeatReader struct {
	stream []byte
	off    int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.stream[r.off:])
	r.off = (r.off + n) % len(r.stream)
	return n, nil
}

func benchFrames(colours ...byte) []byte {
	var stream []byte
	for _, c := range colours {
		stream = append(stream, wireFBU(wireRawRect(0, 0, benchW, benchH, c, c, c))...)
	}
	return stream
}

func benchMirror(b *testing.B) (*Mirror, *sessionState, *decoder) {
	b.Helper()
	d := newDecoder(bufio.NewReaderSize(&repeatReader{stream: benchFrames(1, 2)}, 64<<10), Limits{}.withDefaults(), benchW, benchH)
	c := &Client{dec: d}
	m := NewMirror(MirrorOptions{})
	st := &sessionState{client: c, cov: newCoverage(image.Pt(benchW, benchH))}
	return m, st, d
}

// BenchmarkMirrorFrame is the cost of Frame into a reused destination: a
// copy under the lock.
func BenchmarkMirrorFrame(b *testing.B) {
	m, st, d := benchMirror(b)
	msg, _ := d.readMessage()
	m.apply(st, msg.(*FramebufferUpdate))
	dst, _ := m.Frame(nil)
	b.SetBytes(int64(len(dst.Pix)))
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = m.Frame(dst)
	}
}

// BenchmarkMirrorUpdate decodes a full-screen Raw update from memory and
// publishes it (every frame differs from the last).
func BenchmarkMirrorUpdate(b *testing.B) {
	m, st, d := benchMirror(b)
	b.SetBytes(benchW * benchH * 4)
	b.ReportAllocs()
	for b.Loop() {
		msg, err := d.readMessage()
		if err != nil {
			b.Fatal(err)
		}
		m.apply(st, msg.(*FramebufferUpdate))
	}
}

// BenchmarkMirrorUpdateSmall is a 64x64 change, a typed character or so.
func BenchmarkMirrorUpdateSmall(b *testing.B) {
	m, st, d := benchMirror(b)
	msg, _ := d.readMessage()
	m.apply(st, msg.(*FramebufferUpdate))
	stream := cat(wireFBU(wireRawRect(100, 100, 64, 64, 200, 0, 0)), wireFBU(wireRawRect(100, 100, 64, 64, 0, 200, 0)))
	d.r = bufio.NewReaderSize(&repeatReader{stream: stream}, 64<<10)
	b.SetBytes(64 * 64 * 4)
	b.ReportAllocs()
	for b.Loop() {
		msg, err := d.readMessage()
		if err != nil {
			b.Fatal(err)
		}
		m.apply(st, msg.(*FramebufferUpdate))
	}
}

func BenchmarkDecodeRawFullFrame(b *testing.B) {
	_, _, d := benchMirror(b)
	b.SetBytes(benchW * benchH * 4)
	for b.Loop() {
		if _, err := d.readMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetOpaque(b *testing.B) {
	p := make([]byte, benchW*benchH*4)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		toRGBA(p)
	}
}

// BenchmarkMirrorUnixSocket is full-frame updates through a real unix
// socket into a running Mirror, as fast as the server writes them.
func BenchmarkMirrorUnixSocket(b *testing.B) {
	srv := newTestServer(b, testServerOptions{width: benchW, height: benchH})
	m := NewMirror(MirrorOptions{Dial: srv.dial})
	runMirror(b, m)
	c := srv.accept(b)
	frames := [][]byte{benchFrames(1), benchFrames(2)}
	c.send(b, frames[0])
	waitClosed(b, m.Ready(), 10*time.Second, "Ready")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.conn.Write(frames[i%2]); err != nil {
				return
			}
		}
	}()
	b.SetBytes(benchW * benchH * 4)
	b.ResetTimer()
	start, _ := m.Changed()
	for i := 0; i < b.N; i++ {
		_, ch := m.Changed()
		<-ch
	}
	b.StopTimer()
	end, _ := m.Changed()
	b.ReportMetric(float64(end-start)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkProxyThroughput pushes desktop data through the viewer proxy to
// a TCP viewer.
func BenchmarkProxyThroughput(b *testing.B) {
	srv := newTestServer(b, testServerOptions{width: benchW, height: benchH})
	l, err := ListenTCP(b.Context(), "127.0.0.1:0", srv.dial, ProxyOptions{ViewerPassword: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var conn io.ReadWriteCloser
	{
		cc, err := dialTCPViewer(l.Addr().String(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		conn = cc
	}
	defer conn.Close()
	up := srv.accept(b)
	frame := benchFrames(7)
	// Request-driven, as RFB is: a server that writes unasked fills any
	// bounded queue, and the proxy rightly cuts such a viewer off.
	go func() {
		for {
			select {
			case <-up.msgs:
			case <-up.closed:
				return
			}
			if _, err := up.conn.Write(frame); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, len(frame))
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := conn.Write(wireFBURFull); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
	if !bytes.Equal(buf, frame) {
		b.Fatal("frames arrived misaligned")
	}
}

// BenchmarkQEMUFullFrame asks a real QEMU for full frames (720x400 SeaBIOS
// text) over its unix socket, poking it so that it refreshes every 30 ms.
// QEMU sends updates only on its refresh timer, so this measures QEMU's
// cadence more than ours.
func BenchmarkQEMUFullFrame(b *testing.B) {
	vm := startQEMU(b, qemuOptions{})
	ctx := b.Context()
	conn, err := vm.dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClient(ctx, conn, ClientOptions{Encodings: []Encoding{EncodingRaw, EncodingDesktopSize, EncodingQEMUExtendedKeyEvent}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	frame := func() int {
		size := c.Framebuffer().Rect.Size()
		if err := c.RequestUpdate(ctx, false, size); err != nil {
			b.Fatal(err)
		}
		if c.ExtendedKeyEvents() {
			c.SendQEMUKey(ctx, false, 0, 0)
		}
		for {
			msg, err := c.ReadMessage(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if u, ok := msg.(*FramebufferUpdate); ok && u.Pixels {
				return len(c.Framebuffer().Pix)
			}
		}
	}
	b.SetBytes(int64(frame()))
	b.ResetTimer()
	for range b.N {
		frame()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
