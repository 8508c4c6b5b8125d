package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
)

// A token in a DevTools URL is a per-desktop shell token with little life
// left: the daemon's, a view or control token, a long-lived one or a
// forged one is refused before anything reaches the guest.
func TestDevToolsURLTokens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const daemon = "wd_devtools_test"
	s := New(Config{Manager: f.Manager, Drive: svc, Token: daemon})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	short := func(role string) string { tok, _ := s.views.issue(f.ID, role, devtoolsURLTTL); return tok }
	long, _ := s.views.issue(f.ID, RoleShell, time.Hour)
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"the daemon's token", daemon, http.StatusForbidden},
		{"a view token", short(RoleView), http.StatusForbidden},
		{"a control token", short(RoleControl), http.StatusForbidden},
		{"a shell token living an hour", long, http.StatusForbidden},
		{"a forged token", "wdt1." + f.ID + ".shell.4102444800.00", http.StatusUnauthorized},
	} {
		resp, err := http.Get(hs.URL + "/v1/cdp/" + c.token + "/json/version")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s in the URL: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	// A short-lived shell token passes; the fake desktop has no Chromium.
	resp, err := http.Get(hs.URL + "/v1/cdp/" + short(RoleShell) + "/json/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		t.Errorf("a short-lived shell token was refused: %d", resp.StatusCode)
	}
}
