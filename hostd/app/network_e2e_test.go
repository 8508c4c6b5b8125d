package app_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/egress"
	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/netpolicy"
)

// The egress policy end to end, through a whole hostd (app.Open) on a
// restored minimal desktop: the guest fetches with curl, read back through
// exec. Every server is on this machine's loopback; the guest reaches them
// only as "host" (the gateway), and only where an entry allows.

// host is one hostd over a state directory, served on a loopback port.
type host struct {
	a   *app.App
	srv *httptest.Server
	c   *client.Client
}

func openHost(t *testing.T, cfg config.Serve) *host {
	t.Helper()
	if cfg.Driver == "libvirt" {
		testenv.UsesLibvirtd(t)
	}
	a, err := app.Open(context.Background(), cfg, testenv.Logger(t))
	if errors.Is(err, desktop.ErrUnavailable) && cfg.Driver == "libvirt" && !testenv.InCI() {
		t.Skipf("%v (scripts/libvirtd --test installs and starts one)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	h := &host{a: a, srv: httptest.NewServer(a.Web.Handler())}
	h.c = client.New(h.srv.URL, a.Token)
	t.Cleanup(h.close)
	return h
}

// close stops this hostd; its desktops keep running for the next one.
func (h *host) close() {
	if h.srv != nil {
		h.srv.CloseClientConnections()
		h.srv.Close()
		h.a.Close()
		h.srv = nil
	}
}

// hostConfig is a hostd whose snapshots directory holds the test's baked
// snapshot of a flavor (linked, not copied).
func hostConfig(t *testing.T, driver, flavor string) (config.Serve, string) {
	t.Helper()
	baked := testenv.Snapshot(t, flavor)
	cfg := config.DefaultServe()
	cfg.StateDir = testenv.DataDir(t)
	cfg.RunDir = testenv.RunDir(t)
	cfg.Driver = driver
	cfg.Accel = "tcg"
	cfg.Limits.PoolSize = 0
	if err := os.MkdirAll(cfg.Snapshots(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(baked.Snapshot.Dir, filepath.Join(cfg.Snapshots(), baked.Snapshot.Name)); err != nil {
		t.Fatal(err)
	}
	return cfg, baked.Snapshot.Name
}

// loopbackServer serves body on 127.0.0.1 and returns its port.
func loopbackServer(t *testing.T, body string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(rawURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// fetch runs curl in the guest and returns what it printed.
func fetch(t *testing.T, h *host, id, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: "curl -sS -m 15 " + url + "; echo \" curl=$?\"", Timeout: api.Duration(30 * time.Second)})
	if err != nil {
		t.Fatalf("exec curl %s: %v", url, err)
	}
	return res.Stdout + res.Stderr
}

func setPolicy(t *testing.T, h *host, id string, p netpolicy.Policy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got netpolicy.Policy
	if err := h.c.Do(ctx, http.MethodPut, "/v1/desktops/"+id+"/network", p, &got); err != nil {
		t.Fatalf("PUT network %+v: %v", p, err)
	}
}

func TestNetworkPolicyEndToEnd(t *testing.T) { testNetworkPolicy(t, "qemu") }

func TestNetworkPolicyEndToEndLibvirt(t *testing.T) { testNetworkPolicy(t, "libvirt") }

func testNetworkPolicy(t *testing.T, driver string) {
	cfg, snap := hostConfig(t, driver, "minimal")
	h := openHost(t, cfg)
	app1 := loopbackServer(t, "hello from the host")
	app2 := loopbackServer(t, "another host service")
	api1 := portOf(t, h.srv.URL)
	events, stop := h.a.Manager.Events().Subscribe()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	id := d.ID
	t.Cleanup(func() {
		if h2 := h; h2.srv != nil {
			h2.c.DeleteDesktop(context.Background(), id)
		}
	})
	if d.Network.Mode != string(netpolicy.None) {
		t.Fatalf("a new desktop's network is %+v, want mode none", d.Network)
	}
	blocked := func(port int) string { return egress.BlockedText("host:" + strconv.Itoa(port)) }
	app1URL := "http://host:" + strconv.Itoa(app1) + "/"

	// None: nothing on the host, not the test server, not hostd's API.
	if out := fetch(t, h, id, app1URL); !strings.Contains(out, blocked(app1)) {
		t.Fatalf("mode none reached the host's test server:\n%s", out)
	}
	if out := fetch(t, h, id, "http://host:"+strconv.Itoa(api1)+"/healthz"); !strings.Contains(out, blocked(api1)) {
		t.Fatalf("mode none reached hostd's API:\n%s", out)
	}

	// Allow host:APP1: that page, and nothing else on the host.
	setPolicy(t, h, id, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(app1)}})
	if out := fetch(t, h, id, app1URL); !strings.Contains(out, "hello from the host curl=0") {
		t.Fatalf("host:%d allowed, yet the guest could not fetch it:\n%s", app1, out)
	}
	if out := fetch(t, h, id, "http://host:"+strconv.Itoa(app2)+"/"); !strings.Contains(out, blocked(app2)) {
		t.Fatalf("another host port was reachable:\n%s", out)
	}
	if out := fetch(t, h, id, "http://host:"+strconv.Itoa(api1)+"/healthz"); !strings.Contains(out, blocked(api1)) {
		t.Fatalf("hostd's API was reachable:\n%s", out)
	}
	waitEvents(t, events, id, "refused host:"+strconv.Itoa(app2), "host:"+strconv.Itoa(app1)+" allowed by host:"+strconv.Itoa(app1))

	// The port proxy reaches a server started in the guest.
	res, err := h.c.Exec(ctx, id, api.ExecRequest{
		Shell:   "mkdir -p /tmp/www && echo 'served from the guest' > /tmp/www/index.html && busybox httpd -p 8000 -h /tmp/www && echo started",
		Timeout: api.Duration(20 * time.Second),
	})
	if err != nil || !strings.Contains(res.Stdout, "started") {
		t.Fatalf("guest httpd: %v %+v", err, res)
	}
	var body string
	if !testenv.Poll(30*time.Second, 50*time.Millisecond, time.Second, func() bool {
		body, err = get(h, "/v1/desktops/"+id+"/ports/8000/index.html")
		return err == nil
	}) {
		t.Fatalf("port proxy: %v", err)
	}
	if body != "served from the guest\n" {
		t.Fatalf("port proxy answered %q", body)
	}
	// A port where nothing listens, and one a server holds only on the
	// guest's 127.0.0.1, are a 502 that says so (they were a 500).
	if res, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: "busybox httpd -p 127.0.0.1:8010 -h /tmp/www && echo started", Timeout: api.Duration(20 * time.Second)}); err != nil || !strings.Contains(res.Stdout, "started") {
		t.Fatalf("guest httpd on its loopback: %v %+v", err, res)
	}
	for _, port := range []string{"8009", "8010"} {
		_, err := get(h, "/v1/desktops/"+id+"/ports/"+port+"/")
		if err == nil || !strings.HasPrefix(err.Error(), "502 ") || !strings.Contains(err.Error(), "nothing listens on port "+port) {
			t.Errorf("port proxy to port %s of the guest: %v, want a 502 saying nothing listens there", port, err)
		}
	}

	// A live change applies to the next connection, and survives a restart
	// of hostd (the desktop keeps running; the new hostd reattaches).
	setPolicy(t, h, id, netpolicy.Policy{Mode: netpolicy.None})
	if out := fetch(t, h, id, app1URL); !strings.Contains(out, blocked(app1)) {
		t.Fatalf("the entry was removed, yet the next fetch went through:\n%s", out)
	}
	setPolicy(t, h, id, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(app1)}})
	h.close()
	h = openHost(t, cfg)
	got, err := h.c.Desktop(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Network.Mode != string(netpolicy.Allow) || len(got.Network.Allow) != 1 {
		t.Fatalf("after a restart the policy is %+v", got.Network)
	}
	if out := fetch(t, h, id, app1URL); !strings.Contains(out, "hello from the host curl=0") {
		t.Fatalf("after a restart of hostd the allowed page is unreachable:\n%s", out)
	}
	if out := fetch(t, h, id, "http://host:"+strconv.Itoa(app2)+"/"); !strings.Contains(out, blocked(app2)) {
		t.Fatalf("after a restart another host port was reachable:\n%s", out)
	}

	// The guest's own loopback sent out of its NIC by root is refused
	// whatever the policy: an event, and an answer that ends the connect
	// at once (the stack dropped it unseen: no event, a hanging connect).
	// An entry for it can never match, and is refused.
	var ce *client.Error
	if err := h.c.Do(ctx, http.MethodPut, "/v1/desktops/"+id+"/network", netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"127.0.0.0/8"}}, nil); !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "host:PORT") {
		t.Errorf("an allow entry for 127.0.0.0/8: %v, want a 400 pointing to host:PORT", err)
	}
	setPolicy(t, h, id, netpolicy.Policy{Mode: netpolicy.Open})
	events2, stop2 := h.a.Manager.Events().Subscribe()
	defer stop2()
	reroute := "ip route del local 127.0.0.0/8 dev lo table local && for f in /proc/sys/net/ipv4/conf/*/route_localnet; do echo 1 > $f; done && " +
		"ip route add 127.0.0.0/8 via 10.0.2.2 && echo rerouted"
	if res, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: reroute, Timeout: api.Duration(20 * time.Second)}); err != nil || !strings.Contains(res.Stdout, "rerouted") {
		t.Fatalf("reroute the guest's loopback: %v %+v", err, res)
	}
	start := time.Now()
	out := fetch(t, h, id, "http://127.0.0.2:8009/")
	t.Logf("curl of 127.0.0.2:8009 out of the NIC, after %s: %s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "curl=7") {
		t.Errorf("a connection to 127.0.0.2 out of the NIC: %s, want it refused at once (curl exit 7)", out)
	}
	waitEvents(t, events2, id, "refused 127.0.0.2:8009: 127.0.0.0/8 is the guest's own loopback")
	if err := h.c.DeleteDesktop(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// get fetches an API path with the daemon's token and returns its body; a
// status other than 200 is an error.
func get(h *host, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+h.a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status + ": " + string(b))
	}
	return string(b), err
}

// waitEvents waits for network events of a desktop whose summaries hold
// each of wants, in any order.
func waitEvents(t *testing.T, events <-chan desktop.Event, id string, wants ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for len(wants) > 0 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if e.Type != desktop.EventNetwork || e.Desktop.ID != id {
				continue
			}
			for i, w := range wants {
				if strings.Contains(e.Summary, w) {
					wants = append(wants[:i], wants[i+1:]...)
					break
				}
			}
		case <-deadline:
			t.Fatalf("no network event with %q", wants)
		}
	}
}

// Chromium in the desktop opens the host's page when an entry allows it,
// and shows the blocked page, titled so, when none does.
func TestChromiumShowsAllowedAndBlockedPages(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "browser")
	h := openHost(t, cfg)
	allowed := loopbackServer(t, "<!doctype html><title>warmdesk-allowed-page</title><h1>allowed</h1>")
	other := loopbackServer(t, "<!doctype html><title>warmdesk-other-page</title>")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap, Network: api.NetworkPolicy{Mode: string(netpolicy.Allow), Allow: []string{"host:" + strconv.Itoa(allowed)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	open := func(url, title string) {
		t.Helper()
		// A second chromium with the same profile hands the URL to the one
		// running (a new tab, which becomes the window's title) and exits.
		res, err := h.c.Exec(ctx, d.ID, api.ExecRequest{
			Shell:   "DISPLAY=:0 DBUS_SESSION_BUS_ADDRESS=disabled: /usr/lib/chromium/chromium --no-sandbox --test-type --user-data-dir=/root/.chromium " + url + " >/dev/null 2>&1; echo handed",
			Timeout: api.Duration(60 * time.Second),
		})
		if err != nil || !strings.Contains(res.Stdout, "handed") {
			t.Fatalf("open %s: %v %+v", url, err, res)
		}
		var last string
		if !testenv.Poll(2*time.Minute, 200*time.Millisecond, 2*time.Second, func() bool {
			res, err := h.c.Exec(ctx, d.ID, api.ExecRequest{Shell: "DISPLAY=:0 xdotool search --name 'Chromium' getwindowname %@", Timeout: api.Duration(20 * time.Second)})
			last = res.Stdout
			return err == nil && strings.Contains(res.Stdout, title)
		}) {
			t.Fatalf("Chromium never showed %q for %s; its windows: %q", title, url, last)
		}
	}
	open("http://host:"+strconv.Itoa(allowed)+"/", "warmdesk-allowed-page")
	open("http://host:"+strconv.Itoa(other)+"/", egress.BlockedTitle)
}

// Apt in a live desktop installs a small package through an entry for the
// Debian mirror the image's sources name. It needs this machine to reach
// that mirror; without it the test skips, saying so.
func TestAptInstallsThroughAnAllowEntry(t *testing.T) {
	const mirror = "deb.debian.org"
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if _, err := net.DefaultResolver.LookupNetIP(rctx, "ip4", mirror); err != nil {
		t.Skipf("this machine cannot resolve the Debian mirror %s: %v", mirror, err)
	}
	cfg, snap := hostConfig(t, "qemu", "minimal")
	h := openHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap, Network: api.NetworkPolicy{Mode: string(netpolicy.Allow), Allow: []string{mirror + ":80"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	res, err := h.c.Exec(ctx, d.ID, api.ExecRequest{
		Shell:   "grep -rh '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null; apt-get -q -o Acquire::Languages=none update && apt-get install -y -q --no-install-recommends hello && hello",
		Timeout: api.Duration(10 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "Hello, world!") {
		t.Fatalf("apt through the allow entry failed (exit %d):\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}
