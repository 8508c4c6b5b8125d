package devtools_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/devtools"
)

// guestBridge runs the guest's real bridge script (images/guest/cdp-bridge)
// on one end of a socket pair, aimed at port on the loopback, and returns
// the host's end.
func guestBridge(t *testing.T, port int) net.Conn {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed to run the guest's bridge script (Debian package python3-minimal): %v", err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, guest := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "guest")
	cmd := exec.Command("python3", "../images/guest/cdp-bridge", "--fd", "3", fmt.Sprint(port))
	cmd.ExtraFiles = []*os.File{guest}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	guest.Close()
	conn, err := net.FileConn(host)
	host.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cmd.Wait() // the bridge ends when its end of the pair does
	})
	return conn
}

// chromiumStandIn serves HTTP and a WebSocket echo on the loopback, as
// Chromium's debugging port does.
func chromiumStandIn(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/json/version", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"Browser": "stand-in", "Host": %q}`, r.Host)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("0123456789abcdef", 1<<16))) // 1 MiB
	})
	mux.HandleFunc("/devtools/browser/x", func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			kind, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			c.WriteMessage(kind, msg)
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func openSession(t *testing.T, conn net.Conn) *devtools.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := devtools.Open(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func httpOver(s *devtools.Session) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return s.Dial(ctx) },
	}, Timeout: 20 * time.Second}
}

func TestBridgeCarriesHTTPAndWebSockets(t *testing.T) {
	s := openSession(t, guestBridge(t, chromiumStandIn(t)))
	client := httpOver(s)
	res, err := client.Get("http://127.0.0.1:9222/json/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"stand-in"`) {
		t.Errorf("discovery through the bridge: %s", body)
	}
	// Several streams at once, one of them large.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			res, err := client.Get("http://127.0.0.1:9222/big")
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			n, err := io.Copy(io.Discard, res.Body)
			if err != nil || n != 1<<20 {
				errs <- fmt.Errorf("read %d bytes of 1 MiB: %v", n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A WebSocket, both ways.
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return s.Dial(ctx) }}
	ws, _, err := d.Dial("ws://127.0.0.1:9222/devtools/browser/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for i := range 3 {
		msg := fmt.Sprintf(`{"id": %d, "method": "Browser.getVersion"}`, i)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := ws.ReadMessage()
		if err != nil || string(got) != msg {
			t.Fatalf("echo %d: %q %v", i, got, err)
		}
	}
}

func TestBridgeSaysWhenChromiumIsNotListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	s := openSession(t, guestBridge(t, port))
	c, err := s.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "debugging port") {
		t.Errorf("read from a stream to nothing: %v, want the guest's reason", err)
	}
}

// A session cut mid-frame (hostd killed while writing) leaves the guest
// out of step: it starts over, and the next session's hello gets through.
func TestBridgeSessionStartsOverAfterAPartialFrame(t *testing.T) {
	conn := guestBridge(t, chromiumStandIn(t))
	conn.Write([]byte{0, 0, 0, 9, 3, 0xff, 0xff, 0xff, 0xff})
	s := openSession(t, conn)
	res, err := httpOver(s).Get("http://127.0.0.1:9222/json/version")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

func TestOpenWithoutABridgeSaysSo(t *testing.T) {
	host, guest := net.Pipe()
	defer guest.Close()
	go io.Copy(io.Discard, guest) // a port nobody answers on
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := devtools.Open(ctx, host)
	if !errors.Is(err, devtools.ErrNoBridge) {
		t.Errorf("open on a silent port: %v, want ErrNoBridge", err)
	}
}

// A guest slow to answer gets several hellos; the answer to any of this
// session's opens it (another session's does not), and the answers to the
// later ones are skipped as frames of no stream.
func TestOpenTakesTheAnswerToAnEarlierHello(t *testing.T) {
	host, guest := net.Pipe()
	defer guest.Close()
	frame := func(id uint32, kind byte, payload string) []byte {
		b := binary.BigEndian.AppendUint32(nil, id)
		b = append(b, kind)
		b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
		return append(b, payload...)
	}
	read := func() (uint32, byte, string) {
		var hdr [9]byte
		if _, err := io.ReadFull(guest, hdr[:]); err != nil {
			t.Error(err)
			return 0, 0, ""
		}
		payload := make([]byte, binary.BigEndian.Uint32(hdr[5:]))
		io.ReadFull(guest, payload)
		return binary.BigEndian.Uint32(hdr[:4]), hdr[4], string(payload)
	}
	go func() {
		var hellos []string
		for len(hellos) < 3 {
			if _, kind, p := read(); kind == 1 {
				hellos = append(hellos, p)
			}
		}
		// An earlier session's answer left in the port, then this one's
		// first.
		guest.Write(frame(0, 1, devtools.Magic+" 1"))
		guest.Write(frame(0, 1, hellos[0]))
		// Later hellos are answered only once the stream opens: the
		// session must not wait for them.
		var later []string
		for {
			id, kind, p := read()
			switch kind {
			case 1:
				later = append(later, p)
			case 2:
				for _, h := range later {
					guest.Write(frame(0, 1, h))
				}
				guest.Write(frame(id, 3, "from the guest"))
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := devtools.Open(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("from the guest"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "from the guest" {
		t.Errorf("stream read %q, %v", got, err)
	}
}
