package web_test

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
	"github.com/warmdesk/warmdesk/web"
)

// The handler tests run the real server, Manager and drive service on the
// fake driver; the guest agent and the screen are in-memory fakes.

const actToken = "wd_test"

// actHarness is a server with one running desktop.
type actHarness struct {
	t     *testing.T
	mgr   *desktop.Manager
	guest *drivetest.Guest
	src   *screenshottest.Source
	srv   *httptest.Server
	id    string
}

func newActHarness(t *testing.T) *actHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	drv := desktoptest.NewFake()
	guest := drivetest.NewGuest(drv)
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
	screen := drivetest.NewScreen(1280, 800)
	svc := drive.New(ctx, drive.Config{Manager: mgr, Screens: &drivetest.Screens{Default: screen}, KeystrokeInterval: time.Microsecond})
	srv := web.New(web.Config{Manager: mgr, Drive: svc, Token: actToken})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	h := &actHarness{t: t, mgr: mgr, guest: guest, src: screen.Src, srv: hs, id: d.ID}
	m, _, err := mgr.Machine(ctx, d.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	screen.FollowInput(m.(*desktoptest.FakeMachine))
	return h
}

// frames are the input frames the desktop's machine received.
func (h *actHarness) frames() [][]desktop.InputEvent {
	h.t.Helper()
	m, _, err := h.mgr.Machine(context.Background(), h.id, false)
	if err != nil {
		h.t.Fatal(err)
	}
	return m.(*desktoptest.FakeMachine).Inputs()
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
