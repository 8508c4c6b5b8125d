package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/internal/fanout"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/recording"
	"github.com/warmdesk/warmdesk/web"
)

// stack is hostd in-process: a QEMU driver, the Manager, screen mirrors and
// the web server, with one desktop restored from the minimal snapshot (or
// another flavor's, startStackOn).
type stack struct {
	url     string
	token   string
	api     *client.Client
	mgr     *desktop.Manager
	desktop api.Desktop
	seen    *requestLog
	// pulls stands for a fleet host's snapshot pulls, whose events the
	// dashboard shows.
	pulls *fanout.Broker[api.Event]
}

const testToken = "wd_browser-test-daemon-token"

func startStack(t *testing.T) *stack { return startStackOn(t, "minimal") }

// startStackOn is startStack with a desktop of another image flavor.
func startStackOn(t *testing.T, flavor string) *stack {
	t.Helper()
	baked := testenv.Snapshot(t, flavor)
	log := testenv.Logger(t)
	ctx := context.Background()
	drv, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	mirrors := drive.NewMirrors(ctx, log)
	mgr := desktop.NewManager(ctx, desktop.Config{
		Driver: drv, Store: desktoptest.NewMemStore(), Catalog: baked.Catalog, Logger: log, Observer: mirrors,
	})
	t.Cleanup(mgr.Close)
	svc := drive.New(ctx, drive.Config{Manager: mgr, Screens: mirrors, Logger: log})
	recs := recording.NewRegistry(t.TempDir(), recording.Options{}, log, func(id string, in recording.Info) {
		mgr.Events().Announce(id, desktop.EventRecording, in.ID+" "+in.State)
	})
	fctx, stopFollow := context.WithCancel(ctx)
	t.Cleanup(stopFollow)
	go recs.Follow(fctx, mgr.Events())
	pulls := &fanout.Broker[api.Event]{}
	srv := web.New(web.Config{Manager: mgr, Drive: svc, Token: testToken, Logger: log, Recordings: recs, PullEvents: pulls.Subscribe})
	seen := &requestLog{}
	hs := httptest.NewServer(seen.wrap(srv.Handler()))
	t.Cleanup(func() {
		// Event streams and WebSockets stay open until their client goes.
		hs.CloseClientConnections()
		hs.Close()
	})
	s := &stack{url: hs.URL, token: testToken, api: client.New(hs.URL, testToken), mgr: mgr, seen: seen, pulls: pulls}
	start := time.Now()
	s.desktop, err = s.api.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name, Name: "browser-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("desktop %s restored in %s", s.desktop.ID, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { s.api.DeleteDesktop(context.Background(), s.desktop.ID) })
	return s
}

// requestLog records every request line and Referer the server sees, so a
// test can prove no token ever travelled in a URL.
type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.lines = append(l.lines, r.Method+" "+r.URL.String()+" referer="+r.Header.Get("Referer"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// containing returns the recorded requests that contain s.
func (l *requestLog) containing(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// issue makes a per-desktop token.
func (s *stack) issue(t *testing.T, role string) api.IssuedToken {
	t.Helper()
	var out api.IssuedToken
	if err := s.api.Do(context.Background(), "POST", "/v1/desktops/"+s.desktop.ID+"/tokens", api.IssueToken{Role: role}, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *stack) get(t *testing.T) api.Desktop {
	t.Helper()
	d, err := s.api.Desktop(context.Background(), s.desktop.ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (s *stack) setControl(t *testing.T, holder, by string) {
	t.Helper()
	if err := s.api.Do(context.Background(), "POST", "/v1/desktops/"+s.desktop.ID+"/control", api.SetControl{Holder: holder, By: by}, nil); err != nil {
		t.Fatal(err)
	}
}

// shell runs a command in the guest, with the desktop's X display, through
// the guest agent: the test's way to see what reached the desktop.
func (s *stack) shell(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, _, err := s.mgr.Machine(ctx, s.desktop.ID, desktop.WaitSetUp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := desktop.Shell(ctx, m.Agent(), "export DISPLAY=:0; "+script, 20*time.Second)
	if err != nil {
		t.Fatalf("guest %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("guest %q: exit %d: %s", script, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// exists reports whether a file exists in the guest.
func (s *stack) exists(t *testing.T, path string) bool {
	t.Helper()
	return s.shell(t, "test -e "+path+" && echo yes || echo no") == "yes"
}

// pointer is where the guest's X server has its pointer.
func (s *stack) pointer(t *testing.T) (x, y int) {
	t.Helper()
	out := s.shell(t, "xdotool getmouselocation --shell")
	vals := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				vals[k] = n
			}
		}
	}
	if _, ok := vals["X"]; !ok {
		t.Fatalf("xdotool getmouselocation: %q", out)
	}
	return vals["X"], vals["Y"]
}

// waitGuest polls the guest until cond holds: the guest offers no event to
// wait on, so this backs off inside a deadline.
func (s *stack) waitGuest(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !testenv.Poll(timeout, 50*time.Millisecond, time.Second, cond) {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

func (s *stack) String() string { return fmt.Sprintf("stack %s desktop %s", s.url, s.desktop.ID) }

// agentMove sends an agent's pointer move through the action API and
// returns the status and body.
func (s *stack) agentMove(t *testing.T) (int, string) {
	t.Helper()
	body := strings.NewReader(`{"actions":[{"action":"move","x":640,"y":400}]}`)
	req, err := http.NewRequest("POST", s.url+"/v1/desktops/"+s.desktop.ID+"/actions", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (s *stack) list(t *testing.T) []api.Desktop {
	t.Helper()
	ds, err := s.api.Desktops(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (s *stack) byName(t *testing.T, name string) api.Desktop {
	t.Helper()
	for _, d := range s.list(t) {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no desktop named %q", name)
	return api.Desktop{}
}
