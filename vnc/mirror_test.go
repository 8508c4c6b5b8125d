package vnc

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// startMirror runs a mirror against srv and returns it with the server's
// side of the connection, after checking the client's opening messages.
func startMirror(t *testing.T, srv *testServer, opts MirrorOptions) (*Mirror, *testServerConn) {
	t.Helper()
	if opts.Dial == nil {
		opts.Dial = srv.dial
	}
	opts.Logger = testLogger(t)
	m := NewMirror(opts)
	runMirror(t, m)
	c := srv.accept(t)
	expectOpening(t, c, srv.width, srv.height)
	return m, c
}

func expectOpening(t *testing.T, c *testServerConn, w, h int) {
	t.Helper()
	if c.shared != 1 {
		t.Fatalf("ClientInit shared flag %d, want 1", c.shared)
	}
	if m := c.next(t); !bytes.Equal(m, wireSetPixelFormatBGRX) {
		t.Fatalf("first message %x, want SetPixelFormat RGBX", m)
	}
	if m := c.next(t); !bytes.Equal(m, appendSetEncodings(nil, MirrorEncodings)) {
		t.Fatalf("second message %x, want SetEncodings %v", m, MirrorEncodings)
	}
	if m := c.next(t); !bytes.Equal(m, appendFramebufferUpdateRequest(nil, false, image.Rect(0, 0, w, h))) {
		t.Fatalf("third message %x, want a full FramebufferUpdateRequest", m)
	}
}

// expectIncremental waits for the incremental request the mirror sends after
// each update, which shows that it has processed the update.
func expectIncremental(t *testing.T, c *testServerConn, w, h int) {
	t.Helper()
	if m := c.nextOfType(t, msgFramebufferUpdateRequest); !bytes.Equal(m, appendFramebufferUpdateRequest(nil, true, image.Rect(0, 0, w, h))) {
		t.Fatalf("request %x, want incremental %dx%d", m, w, h)
	}
}

// paint sends a full frame of one colour and waits for the mirror to take it.
func paint(t *testing.T, c *testServerConn, w, h int, r, g, b byte) {
	t.Helper()
	c.send(t, wireFBU(wireRawRect(0, 0, w, h, r, g, b)))
	expectIncremental(t, c, w, h)
}

func TestMirrorFirstFrame(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})

	if img, n := m.Frame(nil); n != 0 || !img.Rect.Empty() {
		t.Fatalf("before any frame: %v, counter %d", img.Rect, n)
	}
	c.send(t, wireExtKeyAck)
	expectIncremental(t, c, 64, 48)
	// Half a frame is not a frame: the mirror keeps waiting.
	c.send(t, wireFBU(wireRawRect(0, 0, 64, 24, 10, 20, 30)))
	expectIncremental(t, c, 64, 48)
	select {
	case <-m.Ready():
		t.Fatal("ready after half a frame")
	default:
	}
	if n, _ := m.Changed(); n != 0 {
		t.Fatalf("counter %d after half a frame", n)
	}
	c.send(t, wireFBU(wireRawRect(0, 24, 64, 24, 10, 20, 30)))
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")

	img, n := m.Frame(nil)
	if n != 1 || !sameImage(img, solid(64, 48, 10, 20, 30)) {
		t.Fatalf("frame %v counter %d, want solid 64x48 and 1", img.Rect, n)
	}
	if m.Size() != image.Pt(64, 48) || !m.Connected() {
		t.Fatalf("size %v connected %v", m.Size(), m.Connected())
	}
	if _, ok := m.Damage(0); ok {
		t.Fatal("Damage(0) ok: the first frame is a new size")
	}
	if rects, ok := m.Damage(1); !ok || rects != nil {
		t.Fatalf("Damage(current) = %v, %v", rects, ok)
	}
	if _, _, ok := m.Cursor(); ok {
		t.Fatal("cursor without a Cursor rectangle")
	}
}

func TestMirrorUpdatesCountAndDamage(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 0, 0, 0)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")

	_, changed := m.Changed()
	c.send(t, wireFBU(wireRawRect(8, 8, 4, 4, 255, 0, 0), wireRawRect(40, 0, 8, 2, 0, 255, 0)))
	waitClosed(t, changed, 10*time.Second, "a change")
	if n, _ := m.Changed(); n != 2 {
		t.Fatalf("counter %d after one update, want 2", n)
	}
	rects, ok := m.Damage(1)
	want := []image.Rectangle{image.Rect(8, 8, 12, 12), image.Rect(40, 0, 48, 2)}
	if !ok || !reflect.DeepEqual(rects, want) {
		t.Fatalf("Damage(1) = %v, %v; want %v", rects, ok, want)
	}
	img, _ := m.Frame(nil)
	if img.RGBAAt(9, 9) != (color.RGBA{255, 0, 0, 255}) || img.RGBAAt(41, 1) != (color.RGBA{0, 255, 0, 255}) || img.RGBAAt(0, 47) != (color.RGBA{0, 0, 0, 255}) {
		t.Fatal("frame does not show the update")
	}

	// The same pixels again change nothing.
	c.send(t, wireFBU(wireRawRect(8, 8, 4, 4, 255, 0, 0)))
	expectIncremental(t, c, 64, 48)
	expectIncremental(t, c, 64, 48)
	if n, _ := m.Changed(); n != 2 {
		t.Fatalf("counter %d after an update without change, want 2", n)
	}
	// Only the rows that differ count as damage.
	c.send(t, wireFBU(wireRect(0, 0, 64, 48, EncodingCopyRect, 0, 0, 0, 0)))
	c.send(t, wireFBU(wireRawRect(0, 10, 64, 1, 1, 1, 1)))
	n := waitChange(t, m, 2, 10*time.Second)
	if rects, ok := m.Damage(n - 1); !ok || !reflect.DeepEqual(rects, []image.Rectangle{image.Rect(0, 10, 64, 11)}) {
		t.Fatalf("damage %v %v", rects, ok)
	}
}

func TestMirrorResize(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 1, 2, 3)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")

	c.send(t, wireFBU(wireRect(0, 0, 32, 16, EncodingDesktopSize)))
	// After a resize the mirror asks for everything.
	if msg := c.nextOfType(t, msgFramebufferUpdateRequest); !bytes.Equal(msg, appendFramebufferUpdateRequest(nil, false, image.Rect(0, 0, 32, 16))) {
		t.Fatalf("request after resize %x", msg)
	}
	if m.Size() != image.Pt(64, 48) {
		t.Fatalf("size %v before the new size is painted", m.Size())
	}
	c.send(t, wireFBU(wireRawRect(0, 0, 32, 16, 4, 5, 6)))
	waitChange(t, m, 1, 10*time.Second)
	img, n := m.Frame(nil)
	if m.Size() != image.Pt(32, 16) || !sameImage(img, solid(32, 16, 4, 5, 6)) || n != 2 {
		t.Fatalf("after resize: size %v counter %d", m.Size(), n)
	}
	if _, ok := m.Damage(1); ok {
		t.Fatal("damage across a resize")
	}
}

func TestMirrorCursor(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 0, 0, 0)
	c.send(t, wireFBUCursor)
	expectIncremental(t, c, 64, 48)
	img, hot, ok := m.Cursor()
	if !ok || img.Rect != image.Rect(0, 0, 3, 2) || hot != image.Pt(1, 1) || img.RGBAAt(0, 0) != (color.RGBA{1, 2, 3, 255}) {
		t.Fatalf("cursor %v %v %v", ok, hot, img)
	}
	if n, _ := m.Changed(); n != 1 {
		t.Fatalf("a cursor change moved the framebuffer counter to %d", n)
	}
}

func TestMirrorPokeSendsHarmlessKeyReleaseRateLimited(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	c.send(t, wireExtKeyAck)
	expectIncremental(t, c, 64, 48)

	start := time.Now()
	for range 10000 {
		m.Poke()
	}
	elapsed := time.Since(start)
	if msg := c.next(t); !bytes.Equal(msg, wireQEMUKeyUpZero) {
		t.Fatalf("poke sent %x, want %x", msg, wireQEMUKeyUpZero)
	}
	// A marker after the pokes: count what came before it.
	if err := m.SendKey(context.Background(), false, 0xffff); err != nil {
		t.Fatal(err)
	}
	pokes := 1
	for {
		msg := c.next(t)
		if msg[0] == msgKeyEvent {
			break
		}
		pokes++
	}
	if allowed := int(elapsed/pokeInterval) + 2; pokes > allowed {
		t.Fatalf("%d pokes reached the server in %v, want at most %d", pokes, elapsed, allowed)
	}
}

func TestClientQEMUKeyNeedsAcknowledgement(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	conn, err := srv.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(context.Background(), conn, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendQEMUKey(context.Background(), true, 'a', 0x1e); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("before acknowledgement: %v", err)
	}
	sc := srv.accept(t)
	sc.send(t, wireExtKeyAck)
	if _, err := c.ReadMessage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.SendQEMUKey(context.Background(), true, 'a', 0x1e); err != nil {
		t.Fatalf("after acknowledgement: %v", err)
	}
	sc.nextOfType(t, msgClientQEMU)
}

func TestMirrorSendWireBytes(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	c.send(t, wireExtKeyAck)
	expectIncremental(t, c, 64, 48)
	ctx := context.Background()
	steps := []struct {
		send func() error
		want []byte
	}{
		{func() error { return m.SendKey(ctx, true, 'a') }, wireKeyDownA},
		{func() error { return m.SendPointer(ctx, 1, 300, 200) }, wirePointerLeft},
		{func() error { return m.SendQEMUKey(ctx, true, 'a', 0x1e) }, wireQEMUKeyDownA},
		{func() error { return m.SendCutText(ctx, "hé€") }, wireCutTextHi},
	}
	for _, s := range steps {
		if err := s.send(); err != nil {
			t.Fatal(err)
		}
		if got := c.next(t); !bytes.Equal(got, s.want) {
			t.Fatalf("sent %x, want %x", got, s.want)
		}
	}
	if err := m.SendPointer(ctx, 0, -1, 5); err == nil {
		t.Fatal("negative pointer position accepted")
	}
}

func TestMirrorSendWhileDisconnected(t *testing.T) {
	m := NewMirror(MirrorOptions{Dial: func(context.Context) (net.Conn, error) { return nil, errors.New("down") }})
	if err := m.SendKey(context.Background(), true, 'a'); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("SendKey: %v", err)
	}
	m.Poke() // must not block or panic without a connection
}

func TestMirrorKeepsPictureAcrossReconnect(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 7, 7, 7)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")
	before, _ := m.Frame(nil)

	c.conn.Close() // the server goes away; the mirror redials by itself
	c2 := srv.accept(t)
	expectOpening(t, c2, 64, 48)
	c2.send(t, wireFBU(wireRawRect(0, 0, 64, 10, 9, 9, 9)))
	expectIncremental(t, c2, 64, 48)
	if img, n := m.Frame(nil); n != 1 || !sameImage(img, before) {
		t.Fatalf("picture changed to a partial frame of the new connection (counter %d)", n)
	}
	// The same picture again is no change.
	paint(t, c2, 64, 48, 7, 7, 7)
	if n, _ := m.Changed(); n != 1 {
		t.Fatalf("counter %d after an identical frame", n)
	}
	c2.send(t, wireFBU(wireRawRect(0, 0, 64, 48, 8, 8, 8)))
	waitChange(t, m, 1, 10*time.Second)
	if img, _ := m.Frame(nil); !sameImage(img, solid(64, 48, 8, 8, 8)) {
		t.Fatal("frame not updated on the new connection")
	}
}

func TestMirrorReconnectSkipsBackoff(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	var up atomic.Bool
	attempts := make(chan struct{}, 16)
	m := NewMirror(MirrorOptions{
		Logger: testLogger(t),
		Dial: func(ctx context.Context) (net.Conn, error) {
			attempts <- struct{}{}
			if !up.Load() {
				return nil, errors.New("socket gone")
			}
			return srv.dial(ctx)
		},
		MaxBackoff: time.Hour,
	})
	m.minBackoff = time.Hour // only Reconnect can bring it back in time
	runMirror(t, m)
	waitClosed(t, attempts, 10*time.Second, "a dial attempt")
	if m.Connected() {
		t.Fatal("connected with the socket gone")
	}
	up.Store(true)
	m.Reconnect()
	c := srv.accept(t)
	expectOpening(t, c, 64, 48)
	if !m.Connected() {
		t.Fatal("not connected after the handshake")
	}
}

func TestMirrorDropsHostileServerAndRedials(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 3, 3, 3)
	c.send(t, wireFBUHugeRect)
	c.waitClosed(t)
	c2 := srv.accept(t)
	expectOpening(t, c2, 64, 48)
	if img, n := m.Frame(nil); n != 1 || !sameImage(img, solid(64, 48, 3, 3, 3)) {
		t.Fatal("picture lost after a hostile update")
	}
}

func TestMirrorVNCAuth(t *testing.T) {
	srv := newTestServer(t, testServerOptions{password: "hunter2"})
	m, c := startMirror(t, srv, MirrorOptions{Password: "hunter2"})
	paint(t, c, 64, 48, 1, 1, 1)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")
}

func TestMirrorFrameReusesDestination(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 5, 6, 7)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")
	dst := image.NewRGBA(image.Rect(0, 0, 64, 48))
	if got, _ := m.Frame(dst); got != dst || !sameImage(dst, solid(64, 48, 5, 6, 7)) {
		t.Fatal("Frame did not fill the destination of the right size")
	}
	if got, _ := m.Frame(image.NewRGBA(image.Rect(0, 0, 3, 3))); got.Rect.Size() != image.Pt(64, 48) {
		t.Fatal("Frame kept a destination of the wrong size")
	}
	// A sub-image of the right size, with a wider stride.
	big := image.NewRGBA(image.Rect(0, 0, 100, 100))
	sub := big.SubImage(image.Rect(10, 10, 74, 58)).(*image.RGBA)
	if got, _ := m.Frame(sub); got != sub || sub.RGBAAt(10, 10) != (color.RGBA{5, 6, 7, 255}) || big.RGBAAt(9, 9) != (color.RGBA{}) {
		t.Fatal("Frame into a sub-image")
	}
}

// Readers race the update stream; run with -race.
func TestMirrorConcurrentReaders(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	m, c := startMirror(t, srv, MirrorOptions{})
	paint(t, c, 64, 48, 0, 0, 0)
	waitClosed(t, m.Ready(), 10*time.Second, "Ready")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var dst *image.RGBA
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n uint64
			dst, n = m.Frame(dst)
			m.Damage(n - 1)
			m.Cursor()
			m.Size()
			m.Poke()
		}
	}()
	for i := range 50 {
		c.send(t, wireFBU(wireRawRect(0, i%48, 64, 1, byte(i), 1, 1)))
	}
	waitChange(t, m, 40, 10*time.Second)
	close(stop)
	<-done
}

// screenshotSource is screenshot.Source, copied here because vnc must not
// import screenshot; keep the two in step.
type screenshotSource interface {
	Frame(dst *image.RGBA) (*image.RGBA, uint64)
	Changed() (uint64, <-chan struct{})
	Poke()
	Cursor() (img *image.RGBA, hotspot image.Point, ok bool)
}

var _ screenshotSource = (*Mirror)(nil)
