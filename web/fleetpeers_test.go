package web_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// With TLS between a fleet's hosts, a request marked as passed on by
// another host is taken on the peer handler only: on the public one it
// is refused, so a host's passed-on token never travels in the clear.
// Without it (the bench's hosts in one process) both take it.
func TestPassedOnRequestsComeThroughThePeerPort(t *testing.T) {
	f := drivetest.NewDesktop(t)
	svc := drive.New(context.Background(), drive.Config{Manager: f.Manager, Screens: f.Screens})
	get := func(h http.Handler, header ...string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/desktops/"+f.ID, nil)
		req.Header.Set("Authorization", "Bearer "+actToken)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	passedOn := []string{"X-Warmdesk-Proxied-By", "b"}
	tlsOn := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken, HostName: "a", PeerTLS: &tls.Config{}})
	if code := get(tlsOn.Handler(), passedOn...); code != http.StatusForbidden {
		t.Errorf("a passed-on request on the public listener: %d, want 403", code)
	}
	if code := get(tlsOn.PeerHandler(), passedOn...); code != http.StatusOK {
		t.Errorf("a passed-on request on the peer listener: %d, want 200", code)
	}
	if code := get(tlsOn.Handler()); code != http.StatusOK {
		t.Errorf("a client's own request on the public listener: %d, want 200", code)
	}
	clear := web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken, HostName: "a"})
	if code := get(clear.Handler(), passedOn...); code != http.StatusOK {
		t.Errorf("a passed-on request without TLS between hosts: %d, want 200", code)
	}
}
