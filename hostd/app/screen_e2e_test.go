package app_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/vnc"
	"github.com/warmdesk/warmdesk/web"
)

// An ordinary VNC client reaches a desktop through the loopback listener
// the API opens on request, with the listener's password, and sees the same
// screen as the screenshot API; the listener goes with the desktop.
func TestVNCListenerForOrdinaryClients(t *testing.T) {
	s := startActionStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var l web.VNCListener
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
