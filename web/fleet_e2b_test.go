package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// door stands in for the E2B front door on this host: it records what
// reaches it and maps a template to a snapshot by a suffix.
type door struct {
	mu     sync.Mutex
	seen   []string
	others func(context.Context) ([]desktop.Desktop, error)
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.seen = append(d.seen, r.Method+" "+r.URL.Path)
	d.mu.Unlock()
	w.Write([]byte(`{"served_by":"here"}`))
}

func (d *door) SnapshotOf(template string) string { return template + "-snap" }

func (d *door) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// In a fleet, an E2B request about another host's sandbox (control plane
// by path, envd by E2b-Sandbox-Id) reaches that host with its body, and a
// create is placed: passed to the chosen host, or run here once the
// snapshot is brought here. Requests with no credential, already passed
// on, for this host's sandboxes, and lists are served here.
func TestE2BRequestsReachTheHostThatRunsTheSandbox(t *testing.T) {
	f := drivetest.NewDesktop(t)
	o := newOwner(t)
	ownerAddr := strings.TrimPrefix(o.srv.URL, "http://")
	here := &door{}
	// A host that does not answer: a port that was just closed.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	var mu sync.Mutex
	var located, ensured, released []string
	cfg := web.Config{Manager: f.Manager, Token: actToken, HostName: "a",
		Locate: func(_ context.Context, id string) (string, bool, error) {
			mu.Lock()
			located = append(located, id)
			mu.Unlock()
			switch id {
			case "d-lost":
				return "", false, fmt.Errorf("%w: desktop d-lost runs on host c, which the fleet lost", desktop.ErrUnavailable)
			case "d-dead":
				return deadAddr, true, nil
			}
			return ownerAddr, id == "d-elsewhere", nil
		},
		Place: func(_ context.Context, snap string) (string, bool, func(), error) {
			release := func() {
				mu.Lock()
				released = append(released, snap)
				mu.Unlock()
			}
			switch snap {
			case "far-snap":
				return ownerAddr, false, release, nil
			case "near-snap":
				return "", true, release, nil
			case "full-snap":
				return "", false, nil, fmt.Errorf("%w: no host has room", desktop.ErrCapacity)
			}
			return "", false, nil, desktop.ErrNotFound
		},
		EnsureSnapshot: func(_ context.Context, snap string) error {
			mu.Lock()
			ensured = append(ensured, snap)
			mu.Unlock()
			return nil
		},
		Others: func(context.Context) ([]web.RemoteDesktop, error) {
			return []web.RemoteDesktop{{Host: "b", Desktop: desktop.Desktop{ID: "d-elsewhere"}}, {Host: "c", Lost: true, Desktop: desktop.Desktop{ID: "d-lost"}}}, nil
		},
		E2B: func(_ func() string, others func(context.Context) ([]desktop.Desktop, error)) http.Handler {
			here.others = others
			return here
		},
	}
	cfg.Drive = drive.New(context.Background(), drive.Config{Manager: f.Manager, Screens: f.Screens})
	srv := httptest.NewServer(web.New(cfg).Handler())
	t.Cleanup(srv.Close)
	// The door lists the other hosts' sandboxes, a lost host's left out.
	if here.others == nil {
		t.Fatal("the E2B door was given nothing to list the fleet's other sandboxes with")
	}
	if ds, err := here.others(context.Background()); err != nil || len(ds) != 1 || ds[0].ID != "d-elsewhere" {
		t.Fatalf("the fleet's other sandboxes: %+v, %v; want d-elsewhere only", ds, err)
	}
	call := func(method, path, body string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	key := []string{"X-API-KEY", "e2b_" + actToken}
	envd := []string{"E2b-Sandbox-Id", "d-elsewhere", "X-Access-Token", "wde2b_x"}

	for _, c := range []struct {
		method, path string
		header       []string
	}{
		{"GET", "/e2b/sandboxes/d-elsewhere", key},
		{"POST", "/e2b/sandboxes/d-elsewhere/timeout", key},
		{"POST", "/e2b/v2/sandboxes/d-elsewhere/connect", key},
		{"POST", "/e2b/process.Process/Start", envd},
		{"GET", "/e2b/files?path=/tmp/x", envd},
	} {
		before := len(o.requests())
		if code, body := call(c.method, c.path, `{"timeout":60}`, c.header...); code != http.StatusOK || !strings.Contains(body, "owner") || len(o.requests()) != before+1 {
			t.Fatalf("%s %s about another host's sandbox: %d %s; want the owner's answer", c.method, c.path, code, body)
		}
		r := o.requests()[before]
		if r.Method != c.method || r.URL.Path != strings.Split(c.path, "?")[0] || r.Header.Get("X-Warmdesk-Proxied-By") != "a" || r.Header.Get(c.header[0]) != c.header[1] {
			t.Fatalf("the owner got %s %s with headers %v", r.Method, r.URL.Path, r.Header)
		}
	}

	// Served here, never passed on.
	mu.Lock()
	locatedBefore := len(located)
	mu.Unlock()
	ownerBefore := len(o.requests())
	for _, c := range []struct {
		method, path string
		header       []string
	}{
		{"GET", "/e2b/sandboxes/d-elsewhere", nil},                                       // no credential
		{"GET", "/e2b/sandboxes/d-elsewhere", append(key, "X-Warmdesk-Proxied-By", "b")}, // passed on already
		{"GET", "/e2b/sandboxes", key},                                                   // a list
		{"GET", "/e2b/health", nil},                                                      // no sandbox named
	} {
		if code, body := call(c.method, c.path, "", c.header...); code != http.StatusOK || !strings.Contains(body, "here") {
			t.Errorf("%s %s %v: %d %s; want it served here", c.method, c.path, c.header, code, body)
		}
	}
	mu.Lock()
	if len(located) != locatedBefore {
		t.Errorf("the fleet was asked %d times for requests served here", len(located)-locatedBefore)
	}
	mu.Unlock()
	if code, body := call("GET", "/e2b/sandboxes/"+f.ID, "", key...); code != http.StatusOK || !strings.Contains(body, "here") {
		t.Errorf("this host's sandbox: %d %s; want it served here", code, body)
	}
	if n := len(o.requests()); n != ownerBefore {
		t.Errorf("the owner saw %d requests meant for this host", n-ownerBefore)
	}

	// Creates are placed by the template's snapshot.
	create := `{"templateID":"far","timeout":300}`
	if code, body := call("POST", "/e2b/sandboxes", create, key...); code != http.StatusOK || !strings.Contains(body, "owner") {
		t.Fatalf("a create placed on another host: %d %s", code, body)
	}
	if r := o.requests()[len(o.requests())-1]; r.URL.Path != "/e2b/sandboxes" || r.Header.Get("X-Warmdesk-Proxied-By") != "a" {
		t.Fatalf("the owner got the create as %s with headers %v", r.URL.Path, r.Header)
	}
	if code, body := call("POST", "/e2b/v2/sandboxes", `{"templateID":"near"}`, key...); code != http.StatusOK || !strings.Contains(body, "here") {
		t.Fatalf("a create placed here: %d %s", code, body)
	}
	mu.Lock()
	if strings.Join(ensured, ",") != "near-snap" || strings.Join(released, ",") != "far-snap,near-snap" {
		t.Errorf("snapshots brought here %v and placements released %v; want [near-snap] and [far-snap near-snap]", ensured, released)
	}
	mu.Unlock()
	code, body := call("POST", "/e2b/sandboxes", `{"templateID":"full"}`, key...)
	var e2bErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(body), &e2bErr) != nil || code != http.StatusTooManyRequests || e2bErr.Code != code || !strings.Contains(e2bErr.Message, "no host has room") {
		t.Errorf("a create no host has room for: %d %s; want 429 in E2B's error shape", code, body)
	}
	if code, body := call("POST", "/e2b/sandboxes", `{"templateID":"unknown"}`, key...); code != http.StatusOK || !strings.Contains(body, "here") {
		t.Errorf("a create of a snapshot no host lists: %d %s; want this host's front door to answer", code, body)
	}
	// Errors on the way to another host answer in E2B's shape too.
	for _, c := range []struct {
		id   string
		want int
	}{{"d-lost", http.StatusGatewayTimeout}, {"d-dead", http.StatusBadGateway}} {
		code, body := call("GET", "/e2b/sandboxes/"+c.id, "", key...)
		e2bErr.Code, e2bErr.Message = 0, ""
		if json.Unmarshal([]byte(body), &e2bErr) != nil || code != c.want || e2bErr.Code != c.want || e2bErr.Message == "" {
			t.Errorf("sandbox %s: %d %s; want %d in E2B's error shape", c.id, code, body, c.want)
		}
	}
	if got := here.requests(); len(got) != 7 {
		t.Errorf("this host's front door saw %v; want the 4 served here, this host's sandbox and the 2 creates run here", got)
	}
}
