package app_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/vnc"
)

// An ordinary VNC client reaches a desktop through the loopback listener
// the API opens on request, with the listener's password, and sees the same
// screen as the screenshot API; the listener goes with the desktop.
func TestVNCListenerForOrdinaryClients(t *testing.T) {
	s := startActionStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var l api.VNCListener
	if err := s.c.Do(ctx, http.MethodPost, "/v1/desktops/"+s.id+"/vnc/tcp", map[string]any{}, &l); err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(l.Address); host != "127.0.0.1" || len(l.Password) != 8 || !l.ViewOnly {
		t.Fatalf("listener %+v: want loopback, an 8-character password, view-only", l)
	}
	// A wrong password gets nothing.
	conn, err := net.Dial("tcp", l.Address)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vnc.NewClient(ctx, conn, vnc.ClientOptions{Password: "wrongpwd"}); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	conn.Close()
	conn, err = net.Dial("tcp", l.Address)
	if err != nil {
		t.Fatal(err)
	}
	c, err := vnc.NewClient(ctx, conn, vnc.ClientOptions{Password: l.Password})
	if err != nil {
		t.Fatalf("handshake with the listener's password: %v", err)
	}
	size := c.Framebuffer().Bounds().Size()
	c.Close()
	if size.X != 1280 || size.Y != 800 {
		t.Fatalf("framebuffer %v through the listener, want 1280x800", size)
	}
	if err := s.c.Do(ctx, http.MethodDelete, "/v1/desktops/"+s.id+"/vnc/tcp", nil, nil); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", l.Address, time.Second); err == nil {
		conn.Close()
		t.Fatal("the listener still accepts after DELETE")
	}
}

// A paused desktop's screen is still served from the mirror; the agent's
// input is refused with the state.
func TestScreenshotsWhilePaused(t *testing.T) {
	s := startActionStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, _, err := s.c.Screenshot(ctx, s.id, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.Op(ctx, s.id, "pause"); err != nil {
		t.Fatal(err)
	}
	during, hdr, err := s.c.Screenshot(ctx, s.id, nil, false)
	if err != nil {
		t.Fatalf("screenshot of a paused desktop: %v", err)
	}
	if !bytes.Equal(before, during) || hdr.Get("X-Screen-Width") != "1280" {
		t.Errorf("a paused desktop's screenshot differs from the one before the pause")
	}
	_, err = s.c.Actions(ctx, s.id, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindMove, At: &input.Point{X: 10, Y: 10}}}})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.State != "paused" {
		t.Errorf("input to a paused desktop: %v, want 409 with state paused", err)
	}
	if _, err := s.c.Op(ctx, s.id, "resume"); err != nil {
		t.Fatal(err)
	}
}
