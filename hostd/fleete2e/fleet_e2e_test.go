// Package fleete2e runs three hostd processes as one fleet on this
// machine's loopback: etcd members on 127.0.0.11 to .13, the APIs on
// 127.0.0.21 to .23, each host with its own state directory. hostd is this
// test binary re-executed as `hostd serve`.
package fleete2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/e2b"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/cli"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

const runAsHostd = "WARMDESK_TEST_RUN_HOSTD"

func TestMain(m *testing.M) {
	if os.Getenv(runAsHostd) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// host is one hostd of the fleet.
type host struct {
	t      *testing.T
	name   string
	api    string // the address hostd listens on, without a port
	state  string
	runDir string
	args   []string
	// env is added to hostd's environment (a kill point, desktop.FaultEnv).
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	c      *client.Client
	// base and token are the API's URL and the daemon token, for what
	// the client does not do (the event stream).
	base, token string
}

// start runs hostd; ready waits until it answers.
func (h *host) start() {
	addrFile := filepath.Join(h.state, "address")
	os.Remove(addrFile)
	h.log = filepath.Join(h.state, fmt.Sprintf("hostd-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(h.log)
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	h.cmd = exec.Command(os.Args[0], append([]string{"serve", "--state-dir", h.state, "--run-dir", h.runDir,
		"--cache-dir", testenv.CacheDir(), "--listen", h.api + ":0", "--accel", "tcg", "--pool", "0"}, h.args...)...)
	h.cmd.Env = append(append(os.Environ(), runAsHostd+"=1"), h.env...)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	if err := h.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(h.cmd, h.exited)
}

func (h *host) ready() {
	addrFile := filepath.Join(h.state, "address")
	var addr []byte
	var err error
	if !testenv.Poll(3*time.Minute, 10*time.Millisecond, 200*time.Millisecond, func() bool {
		select {
		case <-h.exited:
			return true
		default:
		}
		addr, err = os.ReadFile(addrFile)
		return err == nil
	}) || err != nil {
		h.fail("hostd %s did not start: %v", h.name, err)
	}
	token, err := os.ReadFile(filepath.Join(h.state, "token"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.base, h.token = "http://"+strings.TrimSpace(string(addr)), strings.TrimSpace(string(token))
	h.c = client.New(h.base, h.token)
}

// fleetEvents opens h's event stream, the fleet's, and returns its lines
// once h follows the other n hosts' streams.
func fleetEvents(ctx context.Context, t *testing.T, h *host, n int) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events of %s: %s", h.name, resp.Status)
	}
	lines := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for following := 0; following < n; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%s's event stream ended", h.name)
			}
			if line == "event: "+api.EventFollowing {
				following++
			}
		case <-ctx.Done():
			t.Fatalf("%s's event stream followed %d of the other %d hosts", h.name, following, n)
		}
	}
	return lines
}

// awaitPulled reads an event stream until a pull of snapshot ends on host,
// and returns its progress events' percentages.
func awaitPulled(ctx context.Context, t *testing.T, lines <-chan string, host, snapshot string) []int64 {
	t.Helper()
	var percents []int64
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the event stream ended before the pull")
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev api.Event
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Pull == nil || ev.Host != host || ev.Pull.Snapshot != snapshot {
				continue
			}
			switch ev.Type {
			case api.EventPulling:
				if ev.Pull.Total > 0 {
					percents = append(percents, 100*ev.Pull.Bytes/ev.Pull.Total)
				}
			case api.EventPulled:
				return percents
			case api.EventPullFailed:
				t.Fatalf("the pull on %s failed: %s", host, ev.Summary)
			}
		case <-ctx.Done():
			t.Fatalf("no end of a pull of %s on %s in the fleet's events (progress seen: %v)", snapshot, host, percents)
		}
	}
}

func (h *host) fail(format string, args ...any) {
	h.t.Helper()
	out, _ := os.ReadFile(h.log)
	h.t.Fatalf(format+"\nhostd %s's log:\n%s", append(args, h.name, out)...)
}

// kill ends hostd with SIGKILL, as a crash would.
func (h *host) kill() {
	h.cmd.Process.Kill()
	<-h.exited
}

// stop ends hostd with SIGTERM, which leaves its desktops running, and
// then ends every QEMU under its run directory: a failed test leaves no
// desktop behind to slow the tests after it.
func (h *host) stop() {
	select {
	case <-h.exited:
	default:
		h.cmd.Process.Signal(syscall.SIGTERM)
		<-h.exited
	}
	for _, pid := range testenv.QEMUsUnder(h.runDir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// hold puts a snapshot in h's catalog (a link to the baked one).
func (h *host) hold(snap desktop.Snapshot) {
	snaps := filepath.Join(h.state, "snapshots")
	if err := os.MkdirAll(snaps, 0o700); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Symlink(snap.Dir, filepath.Join(snaps, snap.Name)); err != nil {
		h.t.Fatal(err)
	}
}

// stopAtCleanup stops every host still running when the test ends.
func stopAtCleanup(t *testing.T, hosts []*host) {
	t.Cleanup(func() {
		for _, h := range hosts {
			if h.cmd != nil {
				h.stop()
			}
		}
	})
}

// commonPort finds a port free on every one of addrs now.
func commonPort(t *testing.T, addrs []string) string {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", net.JoinHostPort(addrs[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		free := true
		var held []net.Listener
		for _, a := range addrs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(a, port))
			if err != nil {
				free = false
				break
			}
			held = append(held, l)
		}
		ln.Close()
		for _, l := range held {
			l.Close()
		}
		if free {
			return port
		}
	}
	t.Fatal("no port free on every member's address")
	return ""
}

// formFleet starts three hostd as the fleet "e2e": etcd members on
// 127.0.0.M to M+2, APIs on 127.0.0.A to A+2, TLS between all, and waits
// until each answers. prepare adjusts each host before it starts. It
// returns the hosts, the certificates' directory, the members' peers and
// ports (for growing etcd).
func formFleet(t *testing.T, m, a int, lease time.Duration, prepare func(h *host)) (hosts []*host, certs string, peers []string, peerPort, clientPort string) {
	t.Helper()
	members := []string{fmt.Sprintf("127.0.0.%d", m), fmt.Sprintf("127.0.0.%d", m+1), fmt.Sprintf("127.0.0.%d", m+2)}
	certs = filepath.Join(t.TempDir(), "certs")
	var certHosts []fleet.CertHost
	for i, addr := range members {
		name := "h" + strconv.Itoa(i+1)
		// On the loopback every member calls its peers from 127.0.0.1;
		// the hosts' APIs call each other at their API addresses.
		certHosts = append(certHosts, fleet.CertHost{Name: name, Addrs: []string{addr, "127.0.0.1", fmt.Sprintf("127.0.0.%d", a+i)}})
		peers = append(peers, name+"="+addr)
	}
	if err := fleet.WriteCerts(certs, "e2e", certHosts, time.Now()); err != nil {
		t.Fatal(err)
	}
	peerPort = commonPort(t, members)
	for clientPort == "" || clientPort == peerPort {
		clientPort = commonPort(t, members)
	}
	hosts = make([]*host, 3)
	for i := range hosts {
		h := &host{t: t, name: "h" + strconv.Itoa(i+1), api: fmt.Sprintf("127.0.0.%d", a+i), state: testenv.DataDir(t), runDir: testenv.RunDir(t)}
		h.args = []string{"--cluster-name", "e2e", "--cluster-host", h.name, "--cluster-peers", strings.Join(peers, ","),
			"--cluster-peer-port", peerPort, "--cluster-client-port", clientPort, "--cluster-certs", certs,
			"--cluster-api-port", "0", "--cluster-lease", lease.String()}
		prepare(h)
		hosts[i] = h
	}
	stopAtCleanup(t, hosts)
	// Started together: each waits for a majority of its peers.
	var wg sync.WaitGroup
	for _, h := range hosts {
		h.start()
	}
	for _, h := range hosts {
		wg.Add(1)
		go func() { defer wg.Done(); h.ready() }()
	}
	wg.Wait()
	return hosts, certs, peers, peerPort, clientPort
}

// names lists the hosts h's fleet lists, sorted.
func names(ctx context.Context, h *host) ([]string, api.Fleet, error) {
	f, err := h.c.Fleet(ctx)
	if err != nil {
		return nil, f, err
	}
	var out []string
	for _, fh := range f.Hosts {
		out = append(out, fh.Name)
	}
	slices.Sort(out)
	return out, f, nil
}

// Three hostd processes form a fleet: each lists all three; a create made
// to one host is placed on the host that holds the snapshot and driven
// through any host (REST, the control and VNC WebSockets); the fleet's
// list shows it on its host; a host killed with SIGKILL leaves the list
// within its lease plus 5 s, the desktops of a killed host show
// host_lost, and all are back once it restarts.
func TestThreeHostsFormAFleet(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const lease = 2 * time.Second
	hosts, certs, peers, peerPort, clientPort := formFleet(t, 11, 21, lease, func(h *host) {
		// Only h2 holds the snapshot, and it takes one desktop: a second
		// create goes to a host that pulls the snapshot first.
		if h.name == "h2" {
			h.args = append(h.args, "--max-desktops", "1")
			h.hold(baked.Snapshot)
		}
	})
	all := []string{"h1", "h2", "h3"}
	waitFor := func(h *host, want []string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		var got []string
		var err error
		if !testenv.Poll(within, 20*time.Millisecond, 200*time.Millisecond, func() bool {
			got, _, err = names(ctx, h)
			return err == nil && slices.Equal(got, want)
		}) {
			h.fail("%s lists %v (%v), want %v within %s", h.name, got, err, want, within)
		}
		return time.Since(start)
	}
	// Each host joins once it serves; all see all.
	for _, h := range hosts {
		waitFor(h, all, 30*time.Second)
	}
	_, f, _ := names(ctx, hosts[0])
	for _, fh := range f.Hosts {
		i, _ := strconv.Atoi(strings.TrimPrefix(fh.Name, "h"))
		if !strings.HasPrefix(fh.Address, fmt.Sprintf("127.0.0.%d:", 20+i)) || fh.MaxDesktops == 0 || fh.Accel != "tcg" || slices.Contains(fh.Snapshots, baked.Snapshot.Name) != (fh.Name == "h2") {
			t.Errorf("host %+v: want its API address, its caps, tcg and the snapshots it holds", fh)
		}
	}
	if f.Leader == "" {
		t.Error("the fleet names no etcd leader")
	}
	peersOnlyOverTLS(ctx, t, hosts[0], f, certs)
	// hostd fleet status, as an operator runs it against h1.
	t.Setenv("WARMDESK_ADDR", hosts[0].c.BaseURL)
	t.Setenv("WARMDESK_TOKEN", hosts[0].c.Token)
	var status, statusErr bytes.Buffer
	if code := cli.Main(ctx, []string{"fleet", "status"}, &status, &statusErr); code != 0 || !strings.Contains(status.String(), "3 hosts") ||
		!strings.Contains(status.String(), baked.Snapshot.Name) {
		t.Errorf("hostd fleet status: exit %d, %s%s", code, status.String(), statusErr.String())
	}

	// A create made to h1 is placed on h2, the only host holding the
	// snapshot, and carried out there.
	d, err := hosts[0].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil {
		hosts[0].fail("create through h1: %v", err)
	}
	if d.Host != "h2" {
		t.Fatalf("the desktop was placed on %q, want h2", d.Host)
	}
	if _, err := hosts[1].c.Desktop(ctx, d.ID); err != nil {
		hosts[1].fail("h2 does not have the desktop placed on it: %v", err)
	}
	for _, name := range []string{"records.db"} {
		if _, err := os.Stat(filepath.Join(hosts[1].state, name)); err == nil {
			t.Errorf("h2 wrote %s: in a fleet the records are in etcd", name)
		}
	}
	throughOther(ctx, t, hosts[0], d.ID)
	hostOf := func(h *host) string {
		t.Helper()
		ds, err := h.c.Desktops(ctx)
		if err != nil {
			h.fail("list through %s: %v", h.name, err)
		}
		for _, x := range ds {
			if x.ID == d.ID {
				return x.Host + " " + x.State
			}
		}
		return ""
	}
	if got := hostOf(hosts[2]); got != "h2 running" {
		t.Fatalf("h3's fleet-wide list shows the desktop as %q, want h2 running", got)
	}

	// h2 is full: a create made to h3 goes to a host that lacks the
	// snapshot, which pulls it from h2 (checked file by file) and then
	// runs the desktop; it is driven through h2.
	// h2's event stream is the fleet's: it tells the pull's progress
	// on whichever host pulls.
	events := fleetEvents(ctx, t, hosts[1], 2)
	pullStart := time.Now()
	d2, err := hosts[2].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil {
		hosts[2].fail("create through h3 with h2 full: %v", err)
	}
	t.Logf("a create that pulled the snapshot onto %s took %s", d2.Host, time.Since(pullStart).Round(time.Millisecond))
	if d2.Host == "h2" || d2.Host == "" {
		t.Fatalf("the second desktop was placed on %q, want a host other than the full h2", d2.Host)
	}
	percents := awaitPulled(ctx, t, events, d2.Host, baked.Snapshot.Name)
	if len(percents) < 2 || percents[0] != 0 || percents[len(percents)-1] != 100 {
		t.Errorf("the pull's progress on %s, as h2's events told it: %v%%; want from 0 to 100", d2.Host, percents)
	}
	t.Logf("the pull's progress in h2's events: %v%%", percents)
	puller := hosts[0]
	if d2.Host == "h3" {
		puller = hosts[2]
	}
	pulled := filepath.Join(puller.state, "snapshots", baked.Snapshot.Name)
	if fi, err := os.Lstat(pulled); err != nil || !fi.IsDir() {
		t.Fatalf("%s holds no copy of the snapshot after the pull (%v, %v)", puller.name, fi, err)
	}
	throughOther(ctx, t, hosts[1], d2.ID)
	if err := hosts[1].c.DeleteDesktop(ctx, d2.ID); err != nil {
		hosts[1].fail("delete the second desktop through h2: %v", err)
	}

	// A host that does not lead etcd and runs no desktop dies: it leaves
	// the others' lists within its lease plus 5 s.
	victim := hosts[2]
	if f.Leader == victim.name {
		victim = hosts[0]
	}
	observer := hosts[0]
	if victim == observer {
		observer = hosts[2]
	}
	victim.kill()
	rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == victim.name })
	took := waitFor(hosts[1], rest, lease+5*time.Second)
	t.Logf("%s (etcd led by %s) left h2's list %s after its SIGKILL (lease %s)", victim.name, f.Leader, took.Round(time.Millisecond), lease)
	victim.start()
	victim.ready()
	waitFor(hosts[1], all, 30*time.Second)

	// The desktop's host dies: the fleet shows the desktop host_lost (an
	// election longer when h2 led etcd), and running once h2 is back.
	// Within the lease plus 5 s, or, when h2 led etcd, an election and
	// the new leader's extension of every lease later (lease plus 15 s).
	within := lease + 5*time.Second
	_, f, _ = names(ctx, observer)
	if f.Leader == "h2" {
		within = lease + 15*time.Second
	}
	hosts[1].kill()
	lost := time.Now()
	if !testenv.Poll(within, 20*time.Millisecond, 200*time.Millisecond, func() bool {
		ds, err := observer.c.Desktops(ctx)
		return err == nil && len(ds) == 1 && ds[0].State == "host_lost"
	}) {
		observer.fail("the desktop of the killed h2 is %q through %s, want host_lost", hostOf(observer), observer.name)
	}
	t.Logf("h2's desktop showed host_lost on %s %s after h2's SIGKILL (etcd led by %s)", observer.name, time.Since(lost).Round(time.Millisecond), f.Leader)
	if _, err := observer.c.Desktop(ctx, d.ID); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("a request for the lost host's desktop through %s: %v, want an error saying the host is lost", observer.name, err)
	}
	hosts[1].start()
	hosts[1].ready()
	waitFor(observer, all, 30*time.Second)
	if got := hostOf(observer); got != "h2 running" {
		t.Fatalf("after h2's restart the desktop is %q through %s, want h2 running", got, observer.name)
	}
	// h2 came back as a new generation, which reconciled the record.
	_, f, _ = names(ctx, observer)
	if i := slices.IndexFunc(f.Hosts, func(h api.FleetHost) bool { return h.Name == "h2" }); i < 0 || f.Hosts[i].Generation != 2 {
		t.Errorf("h2 after one restart, in %s's fleet status: %+v; want it at generation 2", observer.name, f.Hosts)
	}
	throughOther(ctx, t, observer, d.ID)

	// The leader's host dies: the fleet answers again within 10 s, and
	// lists it gone once its lease, extended by the election, runs out.
	_, f, _ = names(ctx, observer)
	var leader *host
	observer = nil
	for _, h := range hosts {
		if h.name == f.Leader {
			leader = h
		} else if observer == nil {
			observer = h
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the hosts", f.Leader)
	}
	leader.kill()
	rest = slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == leader.name })
	took = waitFor(observer, rest, lease+15*time.Second)
	t.Logf("the leader's host %s left %s's list %s after its SIGKILL (lease %s)", leader.name, observer.name, took.Round(time.Millisecond), lease)
	leader.start()
	leader.ready()
	waitFor(observer, all, 30*time.Second)
	if err := hosts[0].c.DeleteDesktop(ctx, d.ID); err != nil {
		hosts[0].fail("delete through h1: %v", err)
	}
	if ds, err := hosts[2].c.Desktops(ctx); err != nil || len(ds) != 0 {
		t.Errorf("after the delete h3 lists %+v, %v; want none", ds, err)
	}

	// h2, the snapshot's holder, drained through h1's CLI: a create goes
	// to another host, which pulls the snapshot; undrained, h2 takes the
	// next.
	status.Reset()
	t.Setenv("WARMDESK_ADDR", hosts[0].c.BaseURL) // h1 may have restarted on another port
	if code := cli.Main(ctx, []string{"fleet", "drain", "h2"}, &status, &statusErr); code != 0 {
		t.Fatalf("hostd fleet drain h2: exit %d, %s", code, statusErr.String())
	}
	if _, f, _ = names(ctx, hosts[2]); !slices.ContainsFunc(f.Hosts, func(h api.FleetHost) bool { return h.Name == "h2" && h.Draining }) {
		t.Errorf("h3's view after the drain: %+v, want h2 draining", f.Hosts)
	}
	d3, err := hosts[0].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil || d3.Host == "h2" {
		hosts[0].fail("create with h2 drained: %+v, %v; want it on another host", d3, err)
	}
	if err := hosts[0].c.DeleteDesktop(ctx, d3.ID); err != nil {
		t.Fatal(err)
	}
	// Undrained, h2 takes desktops again: with the other two drained, the
	// next create is h2's.
	for _, step := range [][]string{{"undrain", "h2"}, {"drain", "h1"}, {"drain", "h3"}} {
		if code := cli.Main(ctx, append([]string{"fleet"}, step...), &status, &statusErr); code != 0 {
			t.Fatalf("hostd fleet %v: exit %d, %s", step, code, statusErr.String())
		}
	}
	d4, err := hosts[0].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil || d4.Host != "h2" {
		hosts[0].fail("create with h2 undrained and the others drained: %+v, %v; want it on h2", d4, err)
	}
	hosts[0].c.DeleteDesktop(ctx, d4.ID)

	growEtcd(ctx, t, hosts, certs, peers, peerPort, clientPort, lease)
}

// growEtcd adds a fourth etcd member to the fleet through h1's CLI and
// starts its host joining; once it is in the fleet it dies, and is taken
// out of etcd as a dead member is before its replacement: three became
// four and went back to three, and the fleet goes on.
func growEtcd(ctx context.Context, t *testing.T, hosts []*host, certs string, peers []string, peerPort, clientPort string, lease time.Duration) {
	t.Helper()
	const member, api4 = "127.0.0.15", "127.0.0.27"
	if err := fleet.AddHostCert(certs, "e2e", fleet.CertHost{Name: "h4", Addrs: []string{member, "127.0.0.1", api4}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARMDESK_ADDR", hosts[0].c.BaseURL)
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, []string{"cluster", "member", "add", "h4=" + member}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "--cluster-peers "+strings.Join(append(slices.Clone(peers), "h4="+member), ",")) {
		t.Fatalf("hostd cluster member add h4: exit %d, %s%s", code, out.String(), errOut.String())
	}
	h4 := &host{t: t, name: "h4", api: api4, state: testenv.DataDir(t), runDir: testenv.RunDir(t)}
	h4.args = []string{"--cluster-name", "e2e", "--cluster-host", "h4", "--cluster-peers", strings.Join(append(slices.Clone(peers), "h4="+member), ","),
		"--cluster-peer-port", peerPort, "--cluster-client-port", clientPort, "--cluster-certs", certs,
		"--cluster-api-port", "0", "--cluster-lease", lease.String(), "--cluster-join"}
	stopAtCleanup(t, []*host{h4})
	h4.start()
	h4.ready()
	four := []string{"h1", "h2", "h3", "h4"}
	if !testenv.Poll(30*time.Second, 20*time.Millisecond, 200*time.Millisecond, func() bool {
		got, _, err := names(ctx, hosts[0])
		return err == nil && slices.Equal(got, four)
	}) {
		hosts[0].fail("h1 does not list h4 after it joined")
	}
	out.Reset()
	if code := cli.Main(ctx, []string{"cluster", "member", "list"}, &out, &errOut); code != 0 || strings.Count(out.String(), "joined") != 4 {
		t.Fatalf("hostd cluster member list with h4 in: exit %d, %s%s", code, out.String(), errOut.String())
	}
	h4.kill()
	out.Reset()
	if code := cli.Main(ctx, []string{"cluster", "member", "remove", "h4"}, &out, &errOut); code != 0 {
		t.Fatalf("hostd cluster member remove h4 (dead): exit %d, %s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := cli.Main(ctx, []string{"cluster", "member", "list"}, &out, &errOut); code != 0 || strings.Count(out.String(), "joined") != 3 || strings.Contains(out.String(), "h4") {
		t.Fatalf("hostd cluster member list after h4 left: exit %d, %s%s", code, out.String(), errOut.String())
	}
	if !testenv.Poll(lease+5*time.Second, 20*time.Millisecond, 200*time.Millisecond, func() bool {
		got, _, err := names(ctx, hosts[0])
		return err == nil && slices.Equal(got, []string{"h1", "h2", "h3"})
	}) {
		hosts[0].fail("h1 still lists h4 after it died and left etcd")
	}
}

// throughOther drives a desktop of another host through h: its record, a
// screenshot, an action batch, the control WebSocket, the viewer's VNC
// WebSocket and the E2B door (control plane and envd) all reach the host
// that runs it.
func throughOther(ctx context.Context, t *testing.T, h *host, id string) {
	t.Helper()
	e2bThroughOther(ctx, h, id)
	got, err := h.c.Desktop(ctx, id)
	if err != nil || got.State != "running" {
		h.fail("desktop %s through %s: %+v, %v", id, h.name, got, err)
	}
	if _, _, err := h.c.Screenshot(ctx, id, nil, false); err != nil {
		h.fail("screenshot through %s: %v", h.name, err)
	}
	batch := input.Batch{{Kind: input.KindMove, At: &input.Point{X: 40, Y: 40}}}
	if _, err := h.c.Actions(ctx, id, api.ActionsRequest{Actions: batch}); err != nil {
		h.fail("actions through %s: %v", h.name, err)
	}
	ctl, err := h.c.OpenControl(ctx, id)
	if err != nil {
		h.fail("control socket through %s: %v", h.name, err)
	}
	defer ctl.Close()
	if hello, err := ctl.Recv(); err != nil || hello.Type != "hello" {
		h.fail("control socket through %s said %+v, %v; want hello", h.name, hello, err)
	}
	url := "ws" + strings.TrimPrefix(h.c.BaseURL, "http") + "/v1/desktops/" + id + "/vnc"
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + h.c.Token}})
	if err != nil {
		status := "no answer"
		if resp != nil {
			status = resp.Status
		}
		h.fail("viewer socket through %s: %s, %v", h.name, status, err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, banner, err := ws.ReadMessage()
	if err != nil || !strings.HasPrefix(string(banner), "RFB ") {
		h.fail("viewer socket through %s: first message %q, %v; want the RFB banner", h.name, banner, err)
	}
}

// Two hostd processes keep their records in an existing etcd (one member
// started by the test, as an operator's would be) instead of embedded
// members: both join, and a desktop created through one is driven through
// the other.
func TestHostsOnAnExistingEtcd(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const etcdAddr = "127.0.0.14"
	ports := []string{commonPort(t, []string{etcdAddr}), ""}
	for ports[1] == "" || ports[1] == ports[0] {
		ports[1] = commonPort(t, []string{etcdAddr})
	}
	member, err := fleet.StartMember(ctx, fleet.MemberConfig{Cluster: "existing", Name: "e1", DataDir: t.TempDir(),
		Peers: []fleet.Peer{{Name: "e1", PeerURL: "http://" + etcdAddr + ":" + ports[0], ClientURL: "http://" + etcdAddr + ":" + ports[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	// The hosts' APIs call each other over TLS whatever holds the records.
	certs := filepath.Join(t.TempDir(), "certs")
	if err := fleet.WriteCerts(certs, "existing", []fleet.CertHost{{Name: "x1", Addrs: []string{"127.0.0.24"}}, {Name: "x2", Addrs: []string{"127.0.0.25"}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	hosts := make([]*host, 2)
	for i := range hosts {
		h := &host{t: t, name: "x" + strconv.Itoa(i+1), api: fmt.Sprintf("127.0.0.%d", 24+i), state: testenv.DataDir(t), runDir: testenv.RunDir(t)}
		h.args = []string{"--cluster-name", "existing", "--cluster-host", h.name, "--etcd-endpoints", member.Endpoints()[0], "--cluster-lease", "2s",
			"--cluster-certs", certs, "--cluster-api-port", "0"}
		hosts[i] = h
	}
	hosts[0].hold(baked.Snapshot)
	stopAtCleanup(t, hosts)
	for _, h := range hosts {
		h.start()
		h.ready()
	}
	if !testenv.Poll(30*time.Second, 20*time.Millisecond, 200*time.Millisecond, func() bool {
		got, _, err := names(ctx, hosts[1])
		return err == nil && slices.Equal(got, []string{"x1", "x2"})
	}) {
		hosts[1].fail("x2 does not list both hosts")
	}
	d, err := hosts[1].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil || d.Host != "x1" {
		hosts[1].fail("create through x2: %+v, %v; want it on x1, which holds the snapshot", d, err)
	}
	throughOther(ctx, t, hosts[1], d.ID)
	if err := hosts[1].c.DeleteDesktop(ctx, d.ID); err != nil {
		t.Fatal(err)
	}

	// The daemon token rotated through x2 holds on x1 too: the old one is
	// refused there, the new one works, and x1's token file has it.
	old := hosts[0].token
	tok, err := hosts[1].c.RotateToken(ctx)
	if err != nil {
		t.Fatalf("rotate the fleet's token through x2: %v", err)
	}
	stale := client.New(hosts[0].base, old)
	if !testenv.Poll(10*time.Second, 10*time.Millisecond, 100*time.Millisecond, func() bool {
		_, err := stale.Desktops(ctx)
		var refused *client.Error
		return errors.As(err, &refused) && refused.Status == http.StatusUnauthorized
	}) {
		t.Fatal("x1 still takes the token rotated away on x2")
	}
	if _, err := client.New(hosts[0].base, tok).Desktops(ctx); err != nil {
		t.Fatalf("x1 refuses the fleet's new token: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(hosts[0].state, "token")); err != nil || strings.TrimSpace(string(b)) != tok {
		t.Fatalf("x1's token file after the rotation: %q, %v", b, err)
	}
}

// peersOnlyOverTLS checks h's doors for the fleet's hosts: a request
// marked as passed on is refused on its public API; its peer port takes
// neither plaintext nor a TLS caller without a certificate of the fleet's
// CA, and takes one with (the requests the hosts pass each other go this
// way, as every passed-on call in this test shows).
func peersOnlyOverTLS(ctx context.Context, t *testing.T, h *host, f api.Fleet, certs string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.c.BaseURL+"/v1/desktops", nil)
	req.Header.Set("Authorization", "Bearer "+h.c.Token)
	req.Header.Set("X-Warmdesk-Proxied-By", "h2")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		h.fail("a passed-on request on %s's public API: %v, %v; want 403", h.name, resp, err)
	} else {
		resp.Body.Close()
	}
	var peer string
	for _, fh := range f.Hosts {
		if fh.Name == h.name {
			peer = fh.Peer
		}
	}
	if peer == "" || peer == strings.TrimPrefix(h.c.BaseURL, "http://") {
		h.fail("%s's peer address %q: want one of its own, beside its API", h.name, peer)
	}
	own, err := fleet.LoadPeerTLS(fleet.HostTLS(certs, "h2"))
	if err != nil {
		t.Fatal(err)
	}
	call := func(scheme string, c *tls.Config) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+peer+"/healthz", nil)
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: c}}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := call("https", own.Client); err != nil || code != http.StatusOK {
		h.fail("%s's peer port with a host's certificate: %d, %v; want 200", h.name, code, err)
	}
	if code, err := call("http", nil); err == nil && code == http.StatusOK {
		h.fail("%s's peer port answered a plaintext request", h.name)
	}
	noCert := own.Client.Clone()
	noCert.Certificates = nil
	if code, err := call("https", noCert); err == nil {
		h.fail("%s's peer port answered %d to a caller with no certificate", h.name, code)
	}
}

// e2bThroughOther reads a sandbox another host runs through h's E2B door:
// its record and the list by the API key, envd's health and a file of the
// guest by the sandbox's access token.
func e2bThroughOther(ctx context.Context, h *host, id string) {
	call := func(path string, header ...string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.c.BaseURL+"/e2b"+path, nil)
		if err != nil {
			h.fail("%v", err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			h.fail("E2B %s through %s: %v", path, h.name, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := call("/sandboxes/"+id, "X-API-KEY", "e2b_"+h.c.Token); code != http.StatusOK || !strings.Contains(body, `"sandboxID":"`+id+`"`) {
		h.fail("E2B sandbox %s through %s: %d %s", id, h.name, code, body)
	}
	if code, body := call("/v2/sandboxes", "X-API-KEY", "e2b_"+h.c.Token); code != http.StatusOK || !strings.Contains(body, `"sandboxID":"`+id+`"`) {
		h.fail("E2B list through %s: %d %s; want it to hold %s", h.name, code, body, id)
	}
	envd := []string{"E2b-Sandbox-Id", id, "X-Access-Token", e2b.AccessToken(h.c.Token, id)}
	if code, body := call("/health", envd...); code != http.StatusNoContent {
		h.fail("E2B envd health of %s through %s: %d %s, want 204", id, h.name, code, body)
	}
	if code, body := call("/files?path=/etc/hostname", envd...); code != http.StatusOK || strings.TrimSpace(body) == "" {
		h.fail("E2B envd file read in %s through %s: %d %q", id, h.name, code, body)
	}
}
