package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
	"github.com/warmdesk/warmdesk/web"
)

// The handler tests run the real server, Manager and runner on the fake
// driver; only the Actions back end (guest agent, QMP) and the screens are
// fakes.

const actToken = "wd_test"

// actDevice records the frames a runner sends.
type actDevice struct {
	mu     sync.Mutex
	frames [][]input.Event
	err    error
}

func (d *actDevice) Send(ctx context.Context, events []input.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.frames = append(d.frames, append([]input.Event(nil), events...))
	return nil
}

func (d *actDevice) Frames() [][]input.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]input.Event(nil), d.frames...)
}

type actGuest struct {
	mu    sync.Mutex
	typed []string
	err   error
}

func (g *actGuest) TypeText(ctx context.Context, text string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	g.typed = append(g.typed, text)
	return nil
}

// actFake is a web.Actions over a recording device.
type actFake struct {
	dev    *actDevice
	guest  *actGuest
	mu     sync.Mutex
	runner *input.Runner
	w, h   int

	execFn    func(web.ExecRequest) (web.ExecResult, error)
	streamOut []string // chunks ExecStream sends, "stdout:..." or "stderr:..."
	files     map[string][]byte
	clip      map[string]string
	pointer   *input.Point
}

func newActFake(t *testing.T) *actFake {
	f := &actFake{dev: &actDevice{}, guest: &actGuest{}, w: 1280, h: 800, files: map[string][]byte{}, clip: map[string]string{}}
	r, err := input.NewRunner(input.RunnerConfig{Device: f.dev, Guest: f.guest, KeystrokeInterval: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	f.runner = r
	return f
}

func (f *actFake) Runner(id string) (*input.Runner, error) { return f.runner, nil }
func (f *actFake) ScreenSize(id string) (int, int, error)  { return f.w, f.h, nil }
func (f *actFake) LocatePointer(ctx context.Context, id string) error {
	if f.pointer == nil {
		return errors.New("no pointer")
	}
	f.runner.NotePointer(*f.pointer)
	return nil
}

func (f *actFake) Exec(ctx context.Context, id string, req web.ExecRequest) (web.ExecResult, error) {
	if f.execFn == nil {
		return web.ExecResult{}, errors.New("no exec")
	}
	return f.execFn(req)
}

func (f *actFake) ExecStream(ctx context.Context, id string, req web.ExecRequest, out func(string, []byte)) (web.ExecResult, error) {
	for _, c := range f.streamOut {
		name, data, _ := strings.Cut(c, ":")
		out(name, []byte(data))
	}
	res, err := f.Exec(ctx, id, req)
	res.Stdout, res.Stderr = nil, nil
	return res, err
}

type actFile struct {
	*bytes.Reader
	size int64
}

func (m actFile) Close() error { return nil }
func (m actFile) Size() int64  { return m.size }

func (f *actFake) ReadFile(ctx context.Context, id, path string) (web.GuestFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path == "/tmp" {
		return nil, fmt.Errorf("%w: /tmp is a directory", desktop.ErrInvalid)
	}
	data, ok := f.files[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s does not exist in the guest", desktop.ErrNotFound, path)
	}
	return actFile{bytes.NewReader(data), int64(len(data))}, nil
}

func (f *actFake) WriteFile(ctx context.Context, id, path string, r io.Reader) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return int64(len(data)), err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[path] = data
	return int64(len(data)), nil
}

func (f *actFake) Clipboard(ctx context.Context, id, sel string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clip[sel], nil
}

func (f *actFake) SetClipboard(ctx context.Context, id, sel, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clip[sel] = text
	return nil
}

// actScreen is a web.Screen over an in-memory source.
type actScreen struct {
	src *screenshottest.Source
	cap *screenshot.Capturer
}

func (s actScreen) Source() screenshot.Source { return s.src }
func (s actScreen) Capture(ctx context.Context, o screenshot.Options) (screenshot.Shot, error) {
	return s.cap.Capture(ctx, o)
}
func (s actScreen) Dial(ctx context.Context) (net.Conn, error) { return nil, errors.New("no vnc") }
func (s actScreen) Ready() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

type actScreens struct{ scr actScreen }

func (f actScreens) Screen(id string) (web.Screen, bool) { return f.scr, true }

// actHarness is a server with one running desktop.
type actHarness struct {
	t    *testing.T
	mgr  *desktop.Manager
	acts *actFake
	src  *screenshottest.Source
	srv  *httptest.Server
	id   string
}

func newActHarness(t *testing.T) *actHarness {
	t.Helper()
	ctx := context.Background()
	drv := desktoptest.NewFake()
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desktoptest.BakeFake(ctx, drv, cat, "snap"); err != nil {
		t.Fatal(err)
	}
	lim := desktop.DefaultLimits()
	lim.PoolSize = 0
	mgr := desktop.NewManager(ctx, desktop.Config{Driver: drv, Store: desktoptest.NewMemStore(), Catalog: cat, Limits: lim})
	t.Cleanup(mgr.Close)
	d, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: "snap"})
	if err != nil {
		t.Fatal(err)
	}
	frame := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for i := range frame.Pix {
		frame.Pix[i] = 0xff
	}
	src := screenshottest.NewSource(frame)
	acts := newActFake(t)
	srv := web.New(web.Config{
		Manager: mgr, Token: actToken, Actions: acts,
		Screens: actScreens{actScreen{src: src, cap: screenshot.NewCapturer(src, screenshot.CaptureConfig{})}},
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &actHarness{t: t, mgr: mgr, acts: acts, src: src, srv: hs, id: d.ID}
}

// do sends a request with the daemon token and returns status and body.
func (h *actHarness) do(method, path string, body string, header ...string) (int, []byte) {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+actToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, data
}

func (h *actHarness) path(rest string) string { return "/v1/desktops/" + h.id + rest }

// actError decodes an error answer.
func actError(t *testing.T, data []byte) (code, field, state, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Code, Field, State, Message string
		}
	}
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("error body %s: %v", data, err)
	}
	return e.Error.Code, e.Error.Field, e.Error.State, e.Error.Message
}

// paint changes the fake screen, as a guest redraw would.
func (h *actHarness) paint(c color.Color) {
	h.src.Fill(image.Rect(100, 100, 200, 200), image.NewUniform(c))
}

func actColor(n int) color.Color { return color.RGBA{uint8(n), uint8(n >> 8), 0x40, 0xff} }
