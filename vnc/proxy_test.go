package vnc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// startWSProxy serves ServeWebSocket and reports each session's result.
func startWSProxy(t *testing.T, dial Dialer, opts ProxyOptions) (string, chan error) {
	t.Helper()
	opts.Logger = testLogger(t)
	results := make(chan error, 16)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		results <- ServeWebSocket(w, r, dial, opts)
	}))
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http"), results
}

// dialWSViewer connects a WebSocket viewer and runs its RFB handshake.
func dialWSViewer(t *testing.T, url string, subprotocols ...string) (*wsViewer, ServerInit) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: subprotocols, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("websocket dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	want := ""
	if len(subprotocols) > 0 {
		want = "binary"
	}
	if got := resp.Header.Get("Sec-Websocket-Protocol"); got != want {
		t.Fatalf("negotiated subprotocol %q, want %q", got, want)
	}
	v := &wsViewer{ws: ws}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	si, err := clientHandshake(v, v, "", Limits{}.withDefaults())
	if err != nil {
		t.Fatalf("viewer handshake through the proxy: %v", err)
	}
	ws.SetReadDeadline(time.Time{})
	return v, si
}

func readExactly(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("viewer read: %v", err)
	}
	return b
}

func waitResult(t *testing.T, results chan error) error {
	t.Helper()
	select {
	case err := <-results:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("proxy session did not end within 10s")
		return nil
	}
}

func TestProxyWebSocketRelaysBothWays(t *testing.T) {
	for _, sub := range [][]string{{"binary"}, nil} {
		srv := newTestServer(t, testServerOptions{})
		stats := &ProxyStats{}
		url, results := startWSProxy(t, srv.dial, ProxyOptions{Stats: stats})
		v, si := dialWSViewer(t, url, sub...)
		if si.Width != 64 || si.Height != 48 || si.Name != "test desktop" {
			t.Fatalf("server init through the proxy %+v", si)
		}
		up := srv.accept(t)
		if up.shared != 1 {
			t.Fatal("proxy connected to the desktop unshared")
		}
		stream := cat(wireSetPixelFormatBGRX, wireKeyDownA, wirePointerLeft, wireFBURFull, wireQEMUKeyDownA, wireCutTextHi)
		if _, err := v.Write(stream); err != nil {
			t.Fatal(err)
		}
		for _, want := range [][]byte{wireSetPixelFormatBGRX, wireKeyDownA, wirePointerLeft, wireFBURFull, wireQEMUKeyDownA, wireCutTextHi} {
			if got := up.next(t); !bytes.Equal(got, want) {
				t.Fatalf("desktop got %x, want %x", got, want)
			}
		}
		update := wireFBU(wireRawRect(0, 0, 64, 48, 1, 2, 3))
		up.send(t, update)
		if got := readExactly(t, v, len(update)); !bytes.Equal(got, update) {
			t.Fatal("viewer got different bytes than the desktop sent")
		}
		if s := stats.Snapshot(); s.Viewers != 1 || s.ViewersTotal != 1 || s.BytesFromViewers != uint64(len(stream)) {
			t.Fatalf("stats while connected %+v", s)
		}
		v.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		if err := waitResult(t, results); err != nil {
			t.Fatalf("session ended with %v after the viewer closed", err)
		}
		up.waitClosed(t)
		if s := stats.Snapshot(); s.Viewers != 0 || s.BytesToViewers < uint64(len(update)) {
			t.Fatalf("stats after %+v", s)
		}
	}
}

func TestProxyViewOnlyDropsInput(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	stats := &ProxyStats{}
	url, _ := startWSProxy(t, srv.dial, ProxyOptions{ViewOnly: true, Stats: stats})
	v, _ := dialWSViewer(t, url, "binary")
	up := srv.accept(t)
	v.Write(cat(wireKeyDownA, wirePointerLeft, wireCutTextHi, wireQEMUKeyDownA, wireSetEncodingsWithEMB, wireFBURIncremental))
	if got := up.next(t); !bytes.Equal(got, []byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x11}) {
		t.Fatalf("first message to reach the desktop %x, want SetEncodings without ExtendedMouseButtons", got)
	}
	if got := up.next(t); !bytes.Equal(got, wireFBURIncremental) {
		t.Fatalf("then %x, want the update request", got)
	}
	if s := stats.Snapshot(); s.MessagesDropped != 4 {
		t.Fatalf("dropped %d, want 4", s.MessagesDropped)
	}
}

func TestProxyCutsOffSlowViewerOnly(t *testing.T) {
	srv := newTestServer(t, testServerOptions{width: 512, height: 512})
	stats := &ProxyStats{}
	url, results := startWSProxy(t, srv.dial, ProxyOptions{MaxQueueBytes: 4 << 20, Stats: stats})
	fast, _ := dialWSViewer(t, url)
	fastUp := srv.accept(t)
	slow, _ := dialWSViewer(t, url)
	slowUp := srv.accept(t)
	_ = slow // never reads again

	frame := wireFBU(wireRawRect(0, 0, 512, 512, 9, 9, 9)) // 1 MiB
	go func() {
		for range 256 { // far more than socket buffers and the queue hold
			if _, err := slowUp.conn.Write(frame); err != nil {
				return
			}
		}
	}()
	// The fast viewer keeps up meanwhile.
	for i := range 8 {
		fastUp.send(t, frame)
		if got := readExactly(t, fast, len(frame)); !bytes.Equal(got, frame) {
			t.Fatalf("fast viewer frame %d differs", i)
		}
	}
	if err := waitResult(t, results); !errors.Is(err, ErrSlowViewer) {
		t.Fatalf("slow viewer's session ended with %v, want ErrSlowViewer", err)
	}
	fastUp.send(t, wireBell)
	if got := readExactly(t, fast, 1); !bytes.Equal(got, wireBell) {
		t.Fatal("fast viewer lost its stream when the slow one was cut")
	}
	if s := stats.Snapshot(); s.SlowViewersCut != 1 || s.Viewers != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestProxyEndsUnframeableViewer(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	url, results := startWSProxy(t, srv.dial, ProxyOptions{})
	v, _ := dialWSViewer(t, url)
	up := srv.accept(t)
	v.Write(cat(wireFBURIncremental, []byte{9, 9, 9, 9}))
	up.nextOfType(t, msgFramebufferUpdateRequest)
	if err := waitResult(t, results); !errors.Is(err, ErrProtocol) {
		t.Fatalf("session ended with %v, want ErrProtocol", err)
	}
	_, _, err := v.ws.NextReader()
	if !websocket.IsCloseError(err, websocket.CloseProtocolError) {
		t.Fatalf("viewer saw %v, want a protocol-error close", err)
	}
	up.waitClosed(t)
}

func TestProxyDesktopPasswordStaysWithTheProxy(t *testing.T) {
	srv := newTestServer(t, testServerOptions{password: "qemupass"})
	url, _ := startWSProxy(t, srv.dial, ProxyOptions{Password: "qemupass"})
	_, si := dialWSViewer(t, url) // security None toward the viewer
	if si.Name != "test desktop" {
		t.Fatalf("server init %+v", si)
	}
	srv.accept(t)
}

func TestProxyAnswers502WhenDesktopIsDown(t *testing.T) {
	down := func(context.Context) (net.Conn, error) { return nil, errors.New("no socket") }
	url, results := startWSProxy(t, down, ProxyOptions{})
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dial: %v, response %v", err, resp)
	}
	if err := waitResult(t, results); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Fatalf("result %v", err)
	}
}

func TestProxyTellsViewerWhenDesktopCloses(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	url, results := startWSProxy(t, srv.dial, ProxyOptions{})
	v, _ := dialWSViewer(t, url)
	srv.accept(t).conn.Close()
	if err := waitResult(t, results); !errors.Is(err, errDesktopClosed) {
		t.Fatalf("result %v", err)
	}
	if _, _, err := v.ws.NextReader(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("viewer saw %v, want going-away close", err)
	}
}

func TestListenTCPWithPassword(t *testing.T) {
	srv := newTestServer(t, testServerOptions{})
	stats := &ProxyStats{}
	var dials atomic.Int32
	dial := func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return srv.dial(ctx)
	}
	l, err := ListenTCP(context.Background(), "127.0.0.1:0", dial, ProxyOptions{Stats: stats, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if len(l.Password()) != 8 {
		t.Fatalf("generated password %q", l.Password())
	}
	dialTCP := func(password string) (net.Conn, ServerInit, error) {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		si, err := clientHandshake(conn, conn, password, Limits{}.withDefaults())
		return conn, si, err
	}
	if _, _, err := dialTCP("guess"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, _, err := dialTCP(""); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("no password: %v", err)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("viewers without the password made %d connections to the desktop", n)
	}
	conn, si, err := dialTCP(l.Password())
	if err != nil || si.Width != 64 {
		t.Fatalf("right password: %+v %v", si, err)
	}
	up := srv.accept(t)
	conn.Write(wireFBURFull)
	if got := up.next(t); !bytes.Equal(got, wireFBURFull) {
		t.Fatalf("desktop got %x", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	up.waitClosed(t)
	if s := stats.Snapshot(); s.Viewers != 0 || s.ViewersTotal != 1 {
		t.Fatalf("stats after close %+v", s)
	}
}

func TestListenTCPRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:5900", "example.com:5900"} {
		if l, err := ListenTCP(context.Background(), addr, nil, ProxyOptions{}); err == nil {
			l.Close()
			t.Errorf("%s accepted", addr)
		}
	}
}
