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
	f     *drivetest.Desktop
}

func newActHarness(t *testing.T) *actHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	// A click on the fake screen draws nothing to react with: keys after one
	// need not wait long for it.
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens, KeystrokeInterval: time.Microsecond, KeyReaction: 20 * time.Millisecond})
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken}).Handler())
	t.Cleanup(hs.Close)
	return &actHarness{t: t, mgr: f.Manager, guest: f.Guest, src: f.Screen.Src, srv: hs, id: f.ID, f: f}
}

// frames are the input frames the desktop's machine received.
func (h *actHarness) frames() [][]desktop.InputEvent { return h.f.Machine(h.t).Inputs() }

// do sends a request with the daemon token and returns status and body.
func (h *actHarness) do(method, path string, body string, header ...string) (int, []byte) {
	h.t.Helper()
	status, _, data := h.doHeader(method, path, body, header...)
	return status, data
}

// doHeader is do that also returns the answer's header.
func (h *actHarness) doHeader(method, path string, body string, header ...string) (int, http.Header, []byte) {
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
	return resp.StatusCode, resp.Header, data
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
