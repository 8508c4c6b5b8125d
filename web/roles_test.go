package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// token issues a per-desktop token through the API.
func (h *actHarness) token(t *testing.T, role string) string {
	t.Helper()
	status, body := h.do("POST", h.path("/tokens"), fmt.Sprintf(`{"role": %q}`, role))
	if status != http.StatusCreated {
		t.Fatalf("issue a %s token: %d %s", role, status, body)
	}
	var tok struct{ Token, Role string }
	if err := json.Unmarshal(body, &tok); err != nil || tok.Role != role {
		t.Fatalf("issued %s: %v", body, err)
	}
	return tok.Token
}

// as sends a request with a token and returns the status and body.
func (h *actHarness) as(t *testing.T, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// A control link drives but is no shell: exec over the control socket is
// refused as over HTTP, while a shell token runs it.
func TestControlTokenCannotExecOverTheControlSocket(t *testing.T) {
	h := newActHarness(t)
	c := h.controlAs(t, h.token(t, "control"))
	if m := c.next(); m.Type != "hello" {
		t.Fatalf("first message %+v", m)
	}
	c.send(`{"id": "x", "type": "exec", "shell": "true"}`)
	if m := c.next(); m.ID != "x" || m.Status != http.StatusForbidden || m.Error == nil || !strings.Contains(m.Error.Message, "shell token") {
		t.Fatalf("exec with a control token: %+v", m)
	}
	c.send(`{"id": "a", "type": "actions", "actions": [{"action": "move", "x": 1, "y": 1}]}`)
	if m := c.next(); m.ID != "a" || m.Error != nil {
		t.Fatalf("a batch with a control token: %+v", m)
	}
	s := h.controlAs(t, h.token(t, "shell"))
	s.next()
	s.send(`{"id": "y", "type": "exec", "shell": "true"}`)
	for {
		m := s.next()
		if m.ID == "y" && m.Status == http.StatusForbidden {
			t.Fatalf("exec with a shell token refused: %+v", m)
		}
		if m.ID == "y" && (m.Type == "exec.exit" || m.Type == "result" || m.Type == "error") {
			break
		}
	}
}

// Revoking a desktop's tokens ends every link issued so far for it at
// once; a token issued after works.
func TestRevokeEndsTheDesktopsTokens(t *testing.T) {
	h := newActHarness(t)
	view, shell := h.token(t, "view"), h.token(t, "shell")
	for _, tok := range []string{view, shell} {
		if status, body := h.as(t, tok, "GET", h.path(""), ""); status != http.StatusOK {
			t.Fatalf("before revoking: %d %s", status, body)
		}
	}
	if status, body := h.as(t, view, "DELETE", h.path("/tokens"), ""); status != http.StatusForbidden {
		t.Fatalf("a view token revoked tokens: %d %s", status, body)
	}
	if status, body := h.do("DELETE", h.path("/tokens"), ""); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	for _, tok := range []string{view, shell} {
		if status, _ := h.as(t, tok, "GET", h.path(""), ""); status != http.StatusUnauthorized {
			t.Fatalf("a revoked token answered %d, want 401", status)
		}
	}
	if status, body := h.as(t, h.token(t, "view"), "GET", h.path(""), ""); status != http.StatusOK {
		t.Fatalf("a token issued after revoking: %d %s", status, body)
	}
	if status, _ := h.do("DELETE", "/v1/desktops/d-nosuchdesktop/tokens", ""); status != http.StatusNotFound {
		t.Fatalf("revoking an unknown desktop's tokens: %d, want 404", status)
	}
}

// Only the daemon's token may have a picture upscaled past the screen.
func TestOnlyTheDaemonUpscales(t *testing.T) {
	h := newActHarness(t)
	view := h.token(t, "view")
	screen := h.screenSize(t)
	big := fmt.Sprintf("/screenshot?width=%d&height=%d", 2*screen.X, 2*screen.Y)
	if code, body := h.as(t, view, "GET", h.path(big), ""); code != http.StatusBadRequest || !strings.Contains(body, "larger than") {
		t.Fatalf("an upscaled screenshot with a view token: %d %s", code, body)
	}
	if code, body := h.as(t, view, "GET", h.path(fmt.Sprintf("/screenshot?width=%d", screen.X/2)), ""); code != http.StatusOK {
		t.Fatalf("a smaller screenshot with a view token: %d %s", code, body)
	}
	if code, body := h.as(t, actToken, "GET", h.path(big), ""); code != http.StatusOK {
		t.Fatalf("an upscaled screenshot with the daemon's token: %d %s", code, body)
	}
	control := h.token(t, "control")
	q := fmt.Sprintf("?display_width_px=%d&display_height_px=%d", 2*screen.X, 2*screen.Y)
	if code, body := h.as(t, control, "POST", h.path("/computer/anthropic"+q), `{"action": "screenshot"}`); code != http.StatusBadRequest || !strings.Contains(body, "larger than") {
		t.Fatalf("an upscaled display with a control token: %d %s", code, body)
	}
}

// screenSize is the desktop's native screen, from a screenshot's headers.
func (h *actHarness) screenSize(t *testing.T) image.Point {
	t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+h.path("/screenshot"), nil)
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	w, _ := strconv.Atoi(resp.Header.Get("X-Screen-Width"))
	hgt, _ := strconv.Atoi(resp.Header.Get("X-Screen-Height"))
	if w == 0 || hgt == 0 {
		t.Fatalf("screenshot without a screen size: %d %v", resp.StatusCode, resp.Header)
	}
	return image.Pt(w, hgt)
}

// Revoking ends the sockets a revoked token opened, not only its next
// request; the daemon's socket stays.
func TestRevokeClosesTheTokensSockets(t *testing.T) {
	h := newActHarness(t)
	link := h.controlAs(t, h.token(t, "control"))
	own := h.control(t)
	link.next()
	own.next()
	if status, body := h.do("DELETE", h.path("/tokens"), ""); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	link.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := link.ws.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the revoked token's control socket stayed open")
			}
			break
		}
	}
	own.send(`{"id": "p", "type": "ping"}`)
	if m := own.next(); m.ID != "p" {
		t.Fatalf("the daemon's socket after the revoke: %+v", m)
	}
}

// Rotating the daemon's token refuses the old one from the next request
// on and keeps per-desktop tokens working.
func TestRotateDaemonToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	rotations := 0
	srv := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: "wd_old", RotateToken: func() (string, error) {
		rotations++
		return fmt.Sprintf("wd_new%d", rotations), nil
	}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	h := &actHarness{t: t, srv: hs, id: f.ID}
	link := ""
	{
		status, body := h.as(t, "wd_old", "POST", h.path("/tokens"), `{"role": "view"}`)
		var tok struct{ Token string }
		if status != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil {
			t.Fatalf("issue: %d %s", status, body)
		}
		link = tok.Token
	}
	if status, body := h.as(t, link, "POST", "/v1/token/rotate", ""); status != http.StatusForbidden {
		t.Fatalf("a per-desktop token rotated the daemon's: %d %s", status, body)
	}
	status, body := h.as(t, "wd_old", "POST", "/v1/token/rotate", "")
	if status != http.StatusOK || !strings.Contains(body, `"wd_new1"`) {
		t.Fatalf("rotate: %d %s", status, body)
	}
	if status, _ := h.as(t, "wd_old", "GET", "/v1/desktops", ""); status != http.StatusUnauthorized {
		t.Fatalf("the old token after the rotation: %d, want 401", status)
	}
	if status, _ := h.as(t, "wd_new1", "GET", "/v1/desktops", ""); status != http.StatusOK {
		t.Fatalf("the new token: %d", status)
	}
	if status, _ := h.as(t, link, "GET", h.path(""), ""); status != http.StatusOK {
		t.Fatalf("a share link after the rotation: %d", status)
	}
}

// GET /v1/images passes on what the host lists, to the daemon's token only.
func TestListImages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	srv := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: "wd_d", Images: func() ([]api.GuestImage, error) {
		return []api.GuestImage{{Name: "office", Flavor: "minimal", Source: "recipes/office.yaml", Packages: []string{"libreoffice-calc"}, Apps: []string{"calc"}}}, nil
	}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	h := &actHarness{t: t, srv: hs, id: f.ID}
	status, body := h.as(t, "wd_d", "GET", "/v1/images", "")
	var list api.ImageList
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Images) != 1 ||
		list.Images[0].Source != "recipes/office.yaml" || list.Images[0].Apps[0] != "calc" {
		t.Fatalf("GET /v1/images: %d %s", status, body)
	}
}
