package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/internal/fanout"
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
		if websocket.IsWebSocketUpgrade(r) {
			echo(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"served_by":"owner"}`))
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// echo answers a WebSocket's messages with themselves, marked.
func echo(w http.ResponseWriter, r *http.Request) {
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	for {
		kind, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if ws.WriteMessage(kind, append([]byte("owner: "), msg...)) != nil {
			return
		}
	}
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
	// A WebSocket passes through whole: the upgrade, and messages both ways.
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/desktops/d-elsewhere/control", http.Header{"Authorization": {"Bearer " + actToken}})
	if err != nil {
		t.Fatalf("a WebSocket to another host's desktop: %v", err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "owner: hello" {
		t.Fatalf("through the proxied WebSocket: %q, %v", msg, err)
	}
	ws.Close()
	if n := len(o.requests()); n != 2 {
		t.Fatalf("after the WebSocket the owner saw %d requests, want 2", n)
	}
	if code := get("/v1/desktops/d-nowhere", auth...); code != http.StatusNotFound {
		t.Errorf("a desktop no host has: %d, want 404", code)
	}
	if code := get("/v1/desktops/"+f.ID, auth...); code != http.StatusOK || len(o.requests()) != 2 {
		t.Errorf("this host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
	if code := get("/v1/cdp/wdt1.d-elsewhere.shell.4102444800.sig/json/version"); code != http.StatusOK || len(o.requests()) != 3 {
		t.Fatalf("a DevTools token URL for another host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
	// Events narrowed to another host's desktop come from that host, by
	// ?desktop= or by the desktop's own token.
	if code := get("/v1/events?desktop=d-elsewhere", auth...); code != http.StatusOK || len(o.requests()) != 4 {
		t.Fatalf("events of another host's desktop: %d, the owner saw %d requests", code, len(o.requests()))
	}
	if code := get("/v1/events", "Authorization", "Bearer wdt1.d-elsewhere.view.4102444800.sig"); code != http.StatusOK || len(o.requests()) != 5 {
		t.Fatalf("events by another host's desktop's token: %d, the owner saw %d requests", code, len(o.requests()))
	}
	if code := get("/v1/events?desktop=d-elsewhere"); code != http.StatusUnauthorized || len(o.requests()) != 5 {
		t.Errorf("events with no token: %d, want 401 here (the owner saw %d requests)", code, len(o.requests()))
	}
}

// statusRecorder keeps the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() { s.ResponseWriter.(http.Flusher).Flush() }

// A fleet's event stream, asked of one host, carries the other hosts'
// desktop events (marked with their host) and this host's snapshot pulls;
// a host asks the others for their own events only.
func TestAFleetsEventStreamCarriesEveryHost(t *testing.T) {
	defer web.SetPeerRefreshForTest(20 * time.Millisecond)()
	other := drivetest.NewDesktop(t)
	otherAPI := web.New(web.Config{Manager: other.Manager, Token: actToken, HostName: "b",
		// b has peers too: a stream passed on to it must not follow them.
		Peers: func(context.Context) ([]string, error) {
			t.Error("b was asked for its peers by a stream passed on to it")
			return nil, nil
		}})
	// refused tells when b has refused a request for its events.
	refused := make(chan struct{}, 16)
	otherHandler := otherAPI.Handler()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		otherHandler.ServeHTTP(rec, r)
		if r.URL.Path == "/v1/events" && rec.status == http.StatusUnauthorized {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(b.Close)
	bAddr := strings.TrimPrefix(b.URL, "http://")

	here := drivetest.NewDesktop(t)
	var pulls fanout.Broker[api.Event]
	var joined atomic.Bool // b joins the fleet after a's stream opened
	aAPI := web.New(web.Config{Manager: here.Manager, Token: actToken, HostName: "a",
		Peers: func(context.Context) ([]string, error) {
			if joined.Load() {
				return []string{bAddr}, nil
			}
			return nil, nil
		},
		PullEvents: pulls.Subscribe,
	})
	a := httptest.NewServer(aAPI.Handler())
	t.Cleanup(a.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events, ended := make(chan api.Event), make(chan struct{})
	go func() {
		defer close(ended)
		web.SplitEventsForTest(resp.Body, func(block []byte) {
			_, data, _ := strings.Cut(string(block), "data: ")
			var ev api.Event
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &ev) == nil {
				select {
				case events <- ev:
				case <-ctx.Done():
				}
			}
		})
	}()
	next := func(what string, match func(api.Event) bool) api.Event {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if match(ev) {
					return ev
				}
			case <-ctx.Done():
				t.Fatalf("a's stream never carried %s", what)
			}
		}
	}
	joined.Store(true)
	next("that b's stream is followed", func(ev api.Event) bool { return ev.Type == api.EventFollowing && ev.Summary == bAddr })
	if _, err := other.Manager.SetControl(other.ID, desktop.ControlPerson, "test"); err != nil {
		t.Fatal(err)
	}
	ev := next("b's event", func(ev api.Event) bool {
		return ev.Type == string(desktop.EventControl) && ev.Desktop != nil && ev.Desktop.ID == other.ID
	})
	if ev.Host != "b" {
		t.Errorf("b's event says host %q", ev.Host)
	}
	// a subscribed to its pulls before it answered.
	pulls.Publish(api.Event{Type: api.EventPulling, Host: "a", Pull: &api.SnapshotPull{Snapshot: "snap", From: "b", Bytes: 1, Total: 2}})
	if ev := next("the pull", func(ev api.Event) bool { return ev.Type == api.EventPulling }); ev.Pull == nil || ev.Pull.Snapshot != "snap" || ev.Desktop != nil {
		t.Errorf("a pull event: %+v", ev)
	}
	// b refuses the stream's token (say a rotation that reaches a later,
	// or one b alone took) when a follows it again: a, which still takes
	// the token, keeps the stream and tries b again, and follows it once
	// b takes the token.
	otherAPI.SetToken("wd_rotated")
	b.CloseClientConnections()
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatal("b never refused a's stream after its stream was cut")
	}
	otherAPI.SetToken(actToken)
	next("b followed again after its refusal", func(ev api.Event) bool { return ev.Type == api.EventFollowing && ev.Summary == bAddr })
	// The token rotated on both: a ends the stream (the client then
	// learns its token is gone) rather than follow b no more in silence.
	aAPI.SetToken("wd_rotated")
	otherAPI.SetToken("wd_rotated")
	b.CloseClientConnections()
	for {
		select {
		case <-events:
		case <-ended:
			return
		case <-ctx.Done():
			t.Fatal("a's stream went on after b refused its token")
		}
	}
}
