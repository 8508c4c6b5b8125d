package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// owner is another fleet host, as far as this host's proxy can tell: it
// records what reaches it.
type owner struct {
	mu   sync.Mutex
	seen []*http.Request
	srv  *httptest.Server
}

func newOwner(t *testing.T) *owner {
	o := &owner{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.Clone(context.Background()))
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"served_by":"owner"}`))
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *owner) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.seen...)
}

// A request for a desktop another host runs is passed to it with the
// Host the client called and the proxy's mark; one without a token, one
// already passed on, and one for a desktop no host has are not; a
// DevTools token URL for another host's desktop goes there too.
func TestRequestsReachTheHostThatRunsTheDesktop(t *testing.T) {
	f := drivetest.NewDesktop(t)
	o := newOwner(t)
	var mu sync.Mutex
	located := 0
	locate := func(_ context.Context, id string) (string, bool, error) {
		mu.Lock()
		located++
		mu.Unlock()
		if id == "d-elsewhere" {
			return strings.TrimPrefix(o.srv.URL, "http://"), true, nil
		}
		return "", false, nil
	}
	svc := drive.New(context.Background(), drive.Config{Manager: f.Manager, Screens: f.Screens})
	srv := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken, Locate: locate, HostName: "a"}).Handler())
	t.Cleanup(srv.Close)
	get := func(path string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	auth := []string{"Authorization", "Bearer " + actToken}

	if code := get("/v1/desktops/d-elsewhere/screenshot", auth...); code != http.StatusOK || len(o.requests()) != 1 {
		t.Fatalf("a screenshot of another host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
	r := o.requests()[0]
	if r.URL.Path != "/v1/desktops/d-elsewhere/screenshot" || r.Header.Get("X-Warmdesk-Proxied-By") != "a" ||
		r.Header.Get("Authorization") != "Bearer "+actToken || r.Host != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("the owner got %s, Host %s, headers %v", r.URL.Path, r.Host, r.Header)
	}
	mu.Lock()
	before := located
	mu.Unlock()
	if code := get("/v1/desktops/d-elsewhere/screenshot"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401 here", code)
	}
	if code := get("/v1/desktops/d-elsewhere", append(auth, "X-Warmdesk-Proxied-By", "b")...); code != http.StatusNotFound {
		t.Errorf("a request another host passed on: %d, want it served here (404)", code)
	}
	mu.Lock()
	if located != before {
		t.Errorf("the fleet was asked %d times for requests that are not passed on", located-before)
	}
	mu.Unlock()
	if code := get("/v1/desktops/d-nowhere", auth...); code != http.StatusNotFound {
		t.Errorf("a desktop no host has: %d, want 404", code)
	}
	if code := get("/v1/desktops/"+f.ID, auth...); code != http.StatusOK || len(o.requests()) != 1 {
		t.Errorf("this host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
	if code := get("/v1/cdp/wdt1.d-elsewhere.shell.4102444800.sig/json/version"); code != http.StatusOK || len(o.requests()) != 2 {
		t.Fatalf("a DevTools token URL for another host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
}
