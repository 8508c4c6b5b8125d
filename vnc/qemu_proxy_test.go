package vnc

import (
	"bufio"
	"context"
	"crypto/des"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/bits"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rfbViewer is a WebSocket viewer that decodes what it gets, for tests.
type rfbViewer struct {
	v *wsViewer
	d *decoder
}

func dialRFBViewer(t *testing.T, url string) *rfbViewer {
	t.Helper()
	v, si := dialWSViewer(t, url, "binary")
	rv := &rfbViewer{v: v, d: newDecoder(bufio.NewReaderSize(v, 64<<10), Limits{}.withDefaults(), si.Width, si.Height)}
	if _, err := v.Write(cat(appendSetPixelFormat(nil, pixelFormatBGRX),
		appendSetEncodings(nil, []Encoding{EncodingRaw, EncodingDesktopSize}))); err != nil {
		t.Fatal(err)
	}
	return rv
}

// request asks for an update and reads until one with pixels arrives.
func (rv *rfbViewer) request(t *testing.T, incremental bool) *image.RGBA {
	t.Helper()
	if _, err := rv.v.Write(appendFramebufferUpdateRequest(nil, incremental, rv.d.fb.Rect)); err != nil {
		t.Fatal(err)
	}
	rv.v.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer rv.v.ws.SetReadDeadline(time.Time{})
	for {
		msg, err := rv.d.readMessage()
		if err != nil {
			t.Fatalf("viewer read: %v", err)
		}
		if u, ok := msg.(*FramebufferUpdate); ok && u.Pixels {
			return rv.d.fb
		}
		if u, ok := msg.(*FramebufferUpdate); ok && u.Resized {
			rv.v.Write(appendFramebufferUpdateRequest(nil, false, rv.d.fb.Rect))
		}
	}
}

func startQEMUProxy(t *testing.T, vm *qemuVM, opts ProxyOptions) (string, chan error) {
	t.Helper()
	opts.Logger = testLogger(t)
	results := make(chan error, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("/control", func(w http.ResponseWriter, r *http.Request) {
		results <- ServeWebSocket(w, r, vm.dial, opts)
	})
	mux.HandleFunc("/view", func(w http.ResponseWriter, r *http.Request) {
		o := opts
		o.ViewOnly = true
		results <- ServeWebSocket(w, r, vm.dial, o)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http"), results
}

var (
	black = color.RGBA{0, 0, 0, 255}
	blue  = color.RGBA{0, 0, 0xa8, 255} // palette 1
	green = color.RGBA{0, 0xa8, 0, 255} // palette 2
)

// waitColour waits for the mirror to match QEMU's screendump in colour c.
func waitColour(t *testing.T, vm *qemuVM, m *Mirror, c color.RGBA) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		img := mirrorMatches(t, vm, m, 30*time.Second)
		if img.RGBAAt(0, 0) == c {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("screen %v, want %v", img.RGBAAt(0, 0), c)
		default:
		}
	}
}

func TestQEMUProxyTwoViewersAndOneViewOnly(t *testing.T) {
	vm := startQEMU(t, qemuOptions{boot: true, trace: []string{"input_event_*"}})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)
	stats := &ProxyStats{}
	url, _ := startQEMUProxy(t, vm, ProxyOptions{Stats: stats})

	a := dialRFBViewer(t, url+"/control")
	b := dialRFBViewer(t, url+"/control")
	c := dialRFBViewer(t, url+"/view")
	want := vm.screendump(t)
	for name, v := range map[string]*rfbViewer{"a": a, "b": b, "view-only": c} {
		if got := v.request(t, false); !sameImage(got, want) {
			t.Fatalf("viewer %s's first frame differs from the screendump", name)
		}
	}
	if n := vm.vncClients(t); n != 4 {
		t.Fatalf("QEMU has %d VNC clients, want the mirror and 3 viewers", n)
	}
	if s := stats.Snapshot(); s.Viewers != 3 {
		t.Fatalf("stats %+v", s)
	}

	// The view-only viewer's input never reaches QEMU. Its update request
	// after the input shows that QEMU has read everything before it.
	c.v.Write(cat(appendPointerEvent(nil, 1, 10, 10), appendPointerEvent(nil, 0, 20, 20),
		appendKeyEvent(nil, true, 'a'), appendKeyEvent(nil, false, 'a')))
	c.request(t, false)
	if n, _ := vm.trace.count("input_event_"); n != 0 {
		t.Fatalf("view-only input reached QEMU:\n%s", vm.trace.String())
	}
	waitColour(t, vm, m, black)
	if s := stats.Snapshot(); s.MessagesDropped != 4 {
		t.Fatalf("dropped %d, want 4", s.MessagesDropped)
	}

	// A controlling viewer's pointer and key do.
	a.v.Write(cat(appendPointerEvent(nil, 1, 10, 10), appendPointerEvent(nil, 0, 20, 20)))
	vm.trace.waitCount(t, "input_event_btn", 1, 10*time.Second)
	a.v.Write(cat(appendKeyEvent(nil, true, 'a'), appendKeyEvent(nil, false, 'a')))
	vm.trace.waitCount(t, "input_event_key", 2, 10*time.Second)
	waitColour(t, vm, m, green)
	// And the other viewer sees it.
	deadline := time.After(30 * time.Second)
	for b.request(t, true).RGBAAt(0, 0) != green {
		select {
		case <-deadline:
			t.Fatal("viewer b never saw the change")
		default:
		}
	}
}

func TestQEMUSlowViewerCutOffFastKeepsUp(t *testing.T) {
	vm := startQEMU(t, qemuOptions{boot: true})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)
	stats := &ProxyStats{}
	url, results := startQEMUProxy(t, vm, ProxyOptions{Stats: stats, MaxQueueBytes: 2 << 20})
	fast := dialRFBViewer(t, url+"/control")
	fast.request(t, false)
	slow := dialRFBViewer(t, url+"/control")

	// The slow viewer asks for full 1 MB Raw frames and never reads; its
	// harmless key release keeps QEMU refreshing every 30 ms.
	stopFlood := make(chan struct{})
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopFlood:
				return
			case <-tick.C:
			}
			if _, err := slow.v.Write(cat(appendFramebufferUpdateRequest(nil, false, image.Rect(0, 0, 640, 400)), wireQEMUKeyUpZero)); err != nil {
				return
			}
		}
	}()
	defer func() { close(stopFlood); <-floodDone }()

	// Meanwhile the fast viewer keeps taking full frames.
	fastFrames := 0
	var cut error
	for cut == nil {
		if got := fast.request(t, false); got.RGBAAt(0, 0) != black {
			t.Fatalf("fast viewer frame %v", got.RGBAAt(0, 0))
		}
		fastFrames++
		select {
		case cut = <-results:
		case <-time.After(60 * time.Second):
			t.Fatal("slow viewer not cut off within 60s")
		default:
		}
	}
	if !errors.Is(cut, ErrSlowViewer) {
		t.Fatalf("session ended with %v, want ErrSlowViewer", cut)
	}
	t.Logf("fast viewer took %d full frames while the slow one fell behind", fastFrames)
	vm.sendKey(t, "a")
	deadline := time.After(30 * time.Second)
	for fast.request(t, true).RGBAAt(0, 0) != green {
		select {
		case <-deadline:
			t.Fatal("fast viewer never saw the change after the cut")
		default:
		}
	}
	waitColour(t, vm, m, green)
	if s := stats.Snapshot(); s.SlowViewersCut != 1 || s.Viewers != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestQEMUVNCSnapshotThroughTCPListener(t *testing.T) {
	requireQEMU(t)
	if _, err := exec.LookPath("vncsnapshot"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("vncsnapshot is required when CI=true: %v", err)
		}
		t.Skipf("vncsnapshot not installed: %v", err)
	}
	vm := startQEMU(t, qemuOptions{boot: true})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)
	vm.sendKey(t, "a")
	waitColour(t, vm, m, green)

	l, err := ListenTCP(context.Background(), "127.0.0.1:0", vm.dial, ProxyOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, vncPasswdFile(l.Password()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "snap.jpg")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := l.Addr().(*net.TCPAddr).Port
	cmd := exec.CommandContext(ctx, "vncsnapshot", "-passwd", passwd, "-nojpeg", "-quality", "100",
		fmt.Sprintf("127.0.0.1::%d", port), out)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vncsnapshot: %v\n%s", err, output)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snap, err := jpeg.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := vm.screendump(t)
	if snap.Bounds().Size() != want.Rect.Size() {
		t.Fatalf("snapshot %v, screen %v", snap.Bounds(), want.Rect)
	}
	// JPEG is lossy: compare the mean error per channel.
	var sum, n float64
	for y := 0; y < want.Rect.Dy(); y += 4 {
		for x := 0; x < want.Rect.Dx(); x += 4 {
			r, g, b, _ := snap.At(x, y).RGBA()
			w := want.RGBAAt(x, y)
			sum += absDiff(r>>8, w.R) + absDiff(g>>8, w.G) + absDiff(b>>8, w.B)
			n += 3
		}
	}
	if mean := sum / n; mean > 3 {
		t.Fatalf("snapshot differs from the screen by %.1f per channel", mean)
	}
}

func absDiff(a uint32, b uint8) float64 {
	if d := float64(a) - float64(b); d > 0 {
		return d
	} else {
		return -d
	}
}

// vncPasswdFile is a vncpasswd(1) file: the password DES-encrypted with the
// fixed key every VNC implementation shares (bit-reversed, as VNC's DES
// takes its keys).
func vncPasswdFile(password string) []byte {
	fixed := []byte{23, 82, 107, 6, 35, 78, 88, 7}
	key := make([]byte, 8)
	for i, b := range fixed {
		key[i] = bits.Reverse8(b)
	}
	block, _ := des.NewCipher(key)
	plain := make([]byte, 8)
	copy(plain, password)
	out := make([]byte, 8)
	block.Encrypt(out, plain)
	return out
}
