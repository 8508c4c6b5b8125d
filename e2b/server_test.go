package e2b_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/e2b"
)

// The control plane and envd's checks, on the real Manager and drive
// service over the fake driver (the guest's side runs in the e2e test).

const daemonToken = "wd_e2btest"

type harness struct {
	t   *testing.T
	srv *httptest.Server
	f   *drivetest.Desktop
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, func(*e2b.Config) {}) }

// newHarnessWith is newHarness with its configuration changed by set.
func newHarnessWith(t *testing.T, set func(*e2b.Config)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	cfg := e2b.Config{Desktops: f.Manager, Events: f.Manager.Events(), Guest: svc, DaemonToken: func() string { return daemonToken },
		Templates: map[string]string{"base": "snap"}}
	set(&cfg)
	s := e2b.New(ctx, cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &harness{t: t, srv: srv, f: f}
}

func (h *harness) do(method, path, body string, header ...string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", "e2b_"+daemonToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// wantError checks E2B's error shape: the status, and the same number as
// the body's code, which is what the SDK reads.
func wantError(t *testing.T, status int, body string, want int, words string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != want || e.Code != want || !strings.Contains(e.Message, words) {
		t.Errorf("%d %s, want %d with code %d and %q", status, body, want, want, words)
	}
}

// In a fleet the list holds the other hosts' sandboxes too, in the one
// order and filtered alike; a fleet that cannot be read fails the list
// in E2B's shape.
func TestListHoldsTheFleetsSandboxes(t *testing.T) {
	far := desktop.Desktop{ID: "d-far", Snapshot: "snap", State: desktop.StateRunning, CreatedAt: time.Now().Add(-time.Hour), Labels: map[string]string{"k": "far"}}
	var othersErr error
	h := newHarnessWith(t, func(c *e2b.Config) {
		c.Others = func(context.Context) ([]desktop.Desktop, error) { return []desktop.Desktop{far}, othersErr }
	})
	st, _, body := h.do("GET", "/v2/sandboxes", "")
	if st != 200 || strings.Count(body, "sandboxID") != 2 || strings.Index(body, "d-far") > strings.Index(body, h.f.ID) {
		t.Errorf("list: %d %s; want d-far (the older) then %s", st, body, h.f.ID)
	}
	if _, _, body := h.do("GET", "/v2/sandboxes?metadata=k%3Dfar", ""); strings.Count(body, "sandboxID") != 1 || !strings.Contains(body, "d-far") {
		t.Errorf("metadata filter over the fleet: %s", body)
	}
	othersErr = fmt.Errorf("%w: etcd out of reach", desktop.ErrUnavailable)
	st, _, body = h.do("GET", "/sandboxes", "")
	wantError(t, st, body, http.StatusServiceUnavailable, "etcd out of reach")
}

func TestControlPlane(t *testing.T) {
	h := newHarness(t)
	st, _, body := h.do("POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"k":"v"},"envVars":{"A":"1"},"timeout":60}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	var sb struct {
		SandboxID, EnvdVersion, EnvdAccessToken, TemplateID, Alias string
	}
	json.Unmarshal([]byte(body), &sb)
	if sb.EnvdVersion != e2b.EnvdVersion || sb.EnvdAccessToken != e2b.AccessToken(daemonToken, sb.SandboxID) || sb.TemplateID != "snap" || sb.Alias != "base" {
		t.Errorf("create answered %s", body)
	}
	d, err := h.f.Manager.Get(sb.SandboxID)
	if err != nil || d.Labels["k"] != "v" || d.Env["A"] != "1" || d.ExpiresAt == nil {
		t.Errorf("the desktop: %+v %v", d, err)
	}

	st, _, body = h.do("GET", "/sandboxes/"+sb.SandboxID, "")
	if st != 200 || !strings.Contains(body, `"state":"running"`) || !strings.Contains(body, `"metadata":{"k":"v"}`) {
		t.Errorf("info: %d %s", st, body)
	}
	if st, _, body := h.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", `{"timeout":120}`); st != 204 || body != "" {
		t.Errorf("timeout: %d %q, want 204 and no body", st, body)
	}
	// Paging: the harness's own desktop, then this one.
	st, hdr, body := h.do("GET", "/v2/sandboxes?limit=1", "")
	next := hdr.Get("X-Next-Token")
	if st != 200 || next == "" || !strings.Contains(body, h.f.ID) || strings.Count(body, "sandboxID") != 1 {
		t.Errorf("first page: %d %q %s", st, next, body)
	}
	st, hdr, body = h.do("GET", "/v2/sandboxes?limit=1&nextToken="+next, "")
	if st != 200 || hdr.Get("X-Next-Token") != "" || !strings.Contains(body, sb.SandboxID) {
		t.Errorf("last page: %d %q %s", st, hdr.Get("X-Next-Token"), body)
	}
	// A page's place holds when the desktop it ended at is gone.
	if err := h.f.Manager.Delete(context.Background(), h.f.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, body := h.do("GET", "/v2/sandboxes?limit=1&nextToken="+next, ""); !strings.Contains(body, sb.SandboxID) {
		t.Errorf("the page after a deleted desktop: %s", body)
	}
	st, _, body = h.do("GET", "/v2/sandboxes?nextToken=d-1", "")
	wantError(t, st, body, 400, "nextToken")
	if _, _, body := h.do("GET", "/v2/sandboxes?metadata=k%3Dother", ""); body != "[]\n" {
		t.Errorf("metadata filter: %s", body)
	}

	if st, _, body := h.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", ""); st != 204 {
		t.Fatalf("pause: %d %s", st, body)
	}
	st, _, body = h.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", "")
	wantError(t, st, body, 409, "already paused")
	if st, _, body := h.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":30}`); st != 201 || !strings.Contains(body, sb.SandboxID) {
		t.Errorf("connect to a paused sandbox: %d %s, want 201", st, body)
	}
	if st, _, body := h.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`); st != 200 {
		t.Errorf("connect to a running sandbox: %d %s, want 200", st, body)
	}
	if st, _, body := h.do("DELETE", "/sandboxes/"+sb.SandboxID, ""); st != 204 || body != "" {
		t.Errorf("kill: %d %q", st, body)
	}
	st, _, body = h.do("DELETE", "/sandboxes/"+sb.SandboxID, "")
	wantError(t, st, body, 404, "not found")
	st, _, body = h.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`)
	wantError(t, st, body, 404, "does not exist")
}

func TestControlPlaneRefusals(t *testing.T) {
	h := newHarness(t)
	st, _, body := h.do("GET", "/v2/sandboxes", "", "X-API-KEY", "e2b_wrong")
	wantError(t, st, body, 401, "X-API-KEY")
	st, _, body = h.do("POST", "/v2/sandboxes", `{"templateID":"nope"}`)
	wantError(t, st, body, 404, `template "nope"`)
	st, _, body = h.do("POST", "/v2/sandboxes", `{"templateID":"base","timeout":0}`)
	wantError(t, st, body, 400, "timeout 0")
	st, _, body = h.do("POST", "/v2/sandboxes", `{"templateID":"base","envVars":{"1BAD":"x"}}`)
	wantError(t, st, body, 400, "not a variable name")
	st, _, body = h.do("POST", "/v2/sandboxes", `{"templateID":"base","autoPause":true}`)
	wantError(t, st, body, 400, "autoPause")
	st, _, body = h.do("POST", "/v2/sandboxes", `{"templateID":`)
	wantError(t, st, body, 400, "malformed JSON")
	st, _, body = h.do("POST", "/sandboxes/"+h.f.ID+"/timeout", `{}`)
	wantError(t, st, body, 400, "timeout is required")
	st, _, body = h.do("GET", "/templates", "")
	wantError(t, st, body, 404, "not part of warmdesk's E2B API")
	if ds := h.f.Manager.List(); len(ds) != 1 {
		t.Errorf("refused creates left desktops: %d", len(ds))
	}
}

func TestEnvdChecksTheSandboxsToken(t *testing.T) {
	h := newHarness(t)
	id := h.f.ID
	rpc := func(sandbox, token string) (int, string) {
		st, _, body := h.do("POST", "/process.Process/List", `{}`, "E2b-Sandbox-Id", sandbox, "X-Access-Token", token, "X-API-KEY", "")
		return st, body
	}
	if st, body := rpc(id, e2b.AccessToken(daemonToken, id)); st != 200 || body != `{"processes":[]}` {
		t.Errorf("List: %d %s", st, body)
	}
	for name, c := range map[string][2]string{
		"no token":              {id, ""},
		"another sandbox's":     {id, e2b.AccessToken(daemonToken, "d-other")},
		"the daemon's token":    {id, daemonToken},
		"an older daemon token": {id, e2b.AccessToken("wd_old", id)},
	} {
		if st, body := rpc(c[0], c[1]); st != 401 || !strings.Contains(body, `"code":"unauthenticated"`) {
			t.Errorf("%s: %d %s, want 401 unauthenticated", name, st, body)
		}
	}
	if st, body := rpc("d-gone", e2b.AccessToken(daemonToken, "d-gone")); st != 404 || !strings.Contains(body, "does not exist") {
		t.Errorf("a sandbox that is gone: %d %s", st, body)
	}
	st, _, body := h.do("GET", "/health", "", "E2b-Sandbox-Id", "d-gone", "X-Access-Token", e2b.AccessToken(daemonToken, "d-gone"))
	if st != http.StatusBadGateway {
		t.Errorf("health of a sandbox that is gone: %d %s, want 502 (the SDK's 'not running')", st, body)
	}
	st, _, _ = h.do("GET", "/health", "", "E2b-Sandbox-Id", id, "X-Access-Token", e2b.AccessToken(daemonToken, id))
	if st != http.StatusNoContent {
		t.Errorf("health: %d, want 204", st)
	}
	tok := e2b.AccessToken(daemonToken, id)
	for method, code := range map[string]string{"SendInput": "unimplemented", "Update": "unimplemented", "Nope": "unimplemented"} {
		st, _, body := h.do("POST", "/process.Process/"+method, `{}`, "E2b-Sandbox-Id", id, "X-Access-Token", tok)
		if st != 501 || !strings.Contains(body, `"code":"`+code+`"`) {
			t.Errorf("%s: %d %s", method, st, body)
		}
	}
	st, _, body = h.do("POST", "/process.Process/SendSignal", `{"process":{"pid":4242},"signal":"SIGNAL_SIGKILL"}`, "E2b-Sandbox-Id", id, "X-Access-Token", tok)
	if st != 404 || !strings.Contains(body, "pid 4242 not found") {
		t.Errorf("signal to an unknown pid: %d %s", st, body)
	}
	st, _, body = h.do("POST", "/filesystem.Filesystem/WatchDir", `{}`, "E2b-Sandbox-Id", id, "X-Access-Token", tok)
	if st != 501 || !strings.Contains(body, "watching is not built") {
		t.Errorf("WatchDir: %d %s", st, body)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares an answer, its varying parts replaced, with
// testdata/NAME.golden.
func golden(t *testing.T, name, got string, replace ...string) {
	t.Helper()
	got = strings.NewReplacer(replace...).Replace(got)
	got = regexp.MustCompile(`"20\d\d-[0-9T:.\-]+Z"`).ReplaceAllString(got, `"TIME"`)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./e2b -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s:\n%s\nwant (testdata/%s.golden):\n%s", name, got, name, want)
	}
}

// The answers the SDK parses, whole: what create, connect, info and list
// return, and the error shapes, as golden files.
func TestControlPlaneGolden(t *testing.T) {
	h := newHarness(t)
	st, hdr, body := h.do("POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"run":"7"},"timeout":120}`)
	var sb struct{ SandboxID, EnvdAccessToken string }
	json.Unmarshal([]byte(body), &sb)
	ids := []string{sb.SandboxID, "SANDBOX", sb.EnvdAccessToken, "ACCESS_TOKEN", h.f.ID, "OTHER"}
	golden(t, "create", fmt.Sprintf("%d %s\n%s", st, hdr.Get("Content-Type"), body), ids...)
	_, _, body = h.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`)
	golden(t, "connect", body, ids...)
	_, _, body = h.do("GET", "/sandboxes/"+sb.SandboxID, "")
	golden(t, "info", body, ids...)
	_, _, body = h.do("GET", "/v2/sandboxes?metadata=run%3D7", "")
	golden(t, "list", body, ids...)
	st, _, body = h.do("GET", "/sandboxes/d-nope", "")
	golden(t, "error-not-found", fmt.Sprintf("%d %s", st, body), ids...)
	if st, _, body := h.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", ""); st != http.StatusNoContent {
		t.Fatalf("pause: %d %s", st, body)
	}
	st, _, body = h.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", "")
	golden(t, "error-paused", fmt.Sprintf("%d %s", st, body), ids...)
}

// A server stream's bytes, whole: a start, output, the end, the trailer.
func TestStreamFramesGolden(t *testing.T) {
	h := newHarness(t)
	tok := e2b.AccessToken(daemonToken, h.f.ID)
	// A request that is not enveloped JSON ends at once, in the trailer.
	st, hdr, body := h.do("POST", "/process.Process/Start", `{"process":{"cmd":"true"}}`, "E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok)
	golden(t, "stream-refused", fmt.Sprintf("%d %s\n%q", st, hdr.Get("Content-Type"), body))
	frame := func(msg string) string {
		return string([]byte{0, 0, 0, byte(len(msg) >> 8), byte(len(msg))}) + msg
	}
	st, _, body = h.do("POST", "/process.Process/Start", frame(`{"process":{"cmd":"/bin/true"},"pty":{"size":{"cols":80,"rows":24}}}`),
		"E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok, "Content-Type", "application/connect+json")
	golden(t, "stream-pty", fmt.Sprintf("%d\n%q", st, body))
}

// rootPasswd is root's passwd entry as the user lookup prints it.
var rootPasswd = []byte("root\nx\n0\n0\nroot\n/root\n/bin/bash\n")

// @e2b/desktop's stream.start() without a domain is refused before
// anything runs in the guest, saying where to watch instead: the URL the
// SDK would build is E2B's cloud. With a domain, x11vnc runs as sent.
func TestStreamStartNeedsADomain(t *testing.T) {
	lines := []string{
		"x11vnc -bg -display :0 -forever -wait 50 -shared -rfbport 5900 -nopw 2>/tmp/x11vnc_stderr.log",
		"x11vnc -bg -display :0 -forever -wait 50 -shared -rfbport 5900 -usepw 2>/tmp/x11vnc_stderr.log -id 0x1e00003",
		"x11vnc -storepasswd s3cret ~/.vnc/passwd",
	}
	for _, domain := range []string{"", "desktops.test"} {
		h := newHarnessWith(t, func(c *e2b.Config) { c.Domain = domain })
		var mu sync.Mutex
		var ran []string
		h.f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
			cmd := strings.Join(c.Args, " ")
			if strings.Contains(cmd, "getent passwd") {
				return desktoptest.GuestResult{Stdout: rootPasswd}, nil
			}
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, cmd)
			return desktoptest.GuestResult{}, nil
		}
		tok := e2b.AccessToken(daemonToken, h.f.ID)
		for _, line := range lines {
			msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", line}}})
			st, _, body := h.do("POST", "/process.Process/Start", string([]byte{0, 0, 0, byte(len(msg) >> 8), byte(len(msg))})+string(msg),
				"E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok, "Content-Type", "application/connect+json")
			refused := strings.Contains(body, `"exitCode":1`) && strings.Contains(body, "stream.start() refused") &&
				strings.Contains(body, "/desktops/"+h.f.ID) && strings.Contains(body, "--e2b-domain")
			if st != http.StatusOK || refused != (domain == "") {
				t.Errorf("domain %q, %s: %d %q", domain, line, st, body)
			}
		}
		mu.Lock()
		reached := strings.Count(strings.Join(ran, "\n"), "-c x11vnc ")
		mu.Unlock()
		if want := map[string]int{"": 0, "desktops.test": len(lines)}[domain]; reached != want {
			t.Errorf("domain %q: %d x11vnc commands reached the guest, want %d: %q", domain, reached, want, ran)
		}
	}
}

// A control-plane body over the limit is 413 naming it, as on hostd's own
// routes; a guest directory read through /files is a clean 400.
func TestTooLargeAndDirectories(t *testing.T) {
	h := newHarness(t)
	st, _, body := h.do("POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"pad":"`+strings.Repeat("x", 2<<20)+`"}}`)
	wantError(t, st, body, http.StatusRequestEntityTooLarge, "over the limit of 1048576 bytes")
	h.f.Guest.MkDir("/etc")
	h.f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		return desktoptest.GuestResult{Stdout: rootPasswd}, nil // the user lookup's getent
	}
	tok := e2b.AccessToken(daemonToken, h.f.ID)
	st, _, body = h.do("GET", "/files?path=/etc&username=root", "", "E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok)
	wantError(t, st, body, http.StatusBadRequest, "is a directory")
}

// busyLifecycle refuses every create as the CPU admission does.
type busyLifecycle struct{ e2b.Lifecycle }

func (busyLifecycle) Create(context.Context, desktop.CreateRequest) (desktop.Desktop, error) {
	return desktop.Desktop{}, fmt.Errorf("create: %w", &desktop.BusyError{Action: "create", Pressure: 0.96, Bound: 0.9, RetryAfter: 5 * time.Second})
}

// A create the host's CPUs have no room for answers 503 in E2B's shape,
// with Retry-After, so the SDK's caller can wait and try again.
func TestCreateRefusedForCPUAnswers503(t *testing.T) {
	h := newHarnessWith(t, func(c *e2b.Config) { c.Desktops = busyLifecycle{c.Desktops} })
	st, header, body := h.do("POST", "/v2/sandboxes", `{"templateID":"base"}`)
	wantError(t, st, body, http.StatusServiceUnavailable, "CPU pressure is 96%")
	if header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q, want 5", header.Get("Retry-After"))
	}
}
