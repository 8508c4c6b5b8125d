package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/web"
)

// moveSamples is how many moves of each kind (idle, busy) are timed.
const moveSamples = 3

// moveHost is one of the two hosts the moves go between: a QEMU driver
// and Manager of its own, its records in the run's etcd, its API, and
// its peer API over the fleet's mutual TLS.
type moveHost struct {
	name         string
	drv          *qemu.Driver
	mgr          *desktop.Manager
	srv, peerSrv *httptest.Server
	c            *client.Client
	runDir, data string
	peer         string
	member       *fleet.Membership
}

func (h *moveHost) close() {
	if h.mgr != nil {
		for _, d := range h.mgr.List() {
			h.mgr.Delete(context.Background(), d.ID)
		}
		h.mgr.Close()
	}
	if h.member != nil {
		h.member.Leave(context.Background())
	}
	for _, s := range []*httptest.Server{h.srv, h.peerSrv} {
		if s != nil {
			s.Close()
		}
	}
	if h.drv != nil {
		h.drv.Close()
	}
	os.RemoveAll(h.runDir)
	os.RemoveAll(h.data)
}

// moveHosts starts hosts "s" and "t" on the run's catalog (both hold the
// snapshot), each passing requests for the other's desktops to it.
func (e *env) moveHosts(ctx context.Context, etcd *clientv3.Client, token string) (map[string]*moveHost, error) {
	certs, err := os.MkdirTemp("", "bench-move-certs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(certs)
	names := []string{"s", "t"}
	var certHosts []fleet.CertHost
	for _, n := range names {
		certHosts = append(certHosts, fleet.CertHost{Name: n, Addrs: []string{"127.0.0.1"}})
	}
	if err := fleet.WriteCerts(certs, "bench", certHosts, time.Now()); err != nil {
		return nil, err
	}
	hosts := map[string]*moveHost{}
	peerOf := func(name string) string { return hosts[name].peer }
	for _, n := range names {
		h := &moveHost{name: n}
		hosts[n] = h
		if err := e.startMoveHost(ctx, etcd, h, certs, token, peerOf); err != nil {
			for _, h := range hosts {
				h.close()
			}
			return nil, fmt.Errorf("move host %s: %w", n, err)
		}
	}
	return hosts, nil
}

func (e *env) startMoveHost(ctx context.Context, etcd *clientv3.Client, h *moveHost, certs, token string, peerOf func(string) string) error {
	tlsCfg, err := fleet.LoadPeerTLS(fleet.HostTLS(certs, h.name))
	if err != nil {
		return err
	}
	if h.data, err = os.MkdirTemp(e.dataDir, "move-"+h.name+"-"); err != nil {
		return err
	}
	if h.runDir, err = os.MkdirTemp("", "wdm"); err != nil {
		return err
	}
	if h.drv, err = qemu.New(ctx, qemu.Options{RunDir: h.runDir, DataDir: h.data, SnapshotsDir: e.cat.Dir(), Logger: e.log}); err != nil {
		return err
	}
	limits := desktop.DefaultLimits()
	limits.MaxDesktops, limits.MaxMemoryMiB, limits.PoolSize = 8, 1<<20, 0
	screens := drive.NewMirrors(context.WithoutCancel(ctx), e.log)
	h.mgr = desktop.NewManager(ctx, desktop.Config{Driver: h.drv, Store: fleet.NewRecords(etcd, h.name, ""), Catalog: e.cat, Logger: e.log, Limits: limits, Observer: screens})
	other := map[string]string{"s": "t", "t": "s"}[h.name]
	server := web.New(web.Config{Manager: h.mgr, Drive: drive.New(ctx, drive.Config{Manager: h.mgr, Screens: screens, Logger: e.log}), Token: token, Logger: e.log,
		HostName: h.name, PeerTLS: tlsCfg.Client, Moves: desktop.NewMoves(h.mgr),
		Locate: func(ctx context.Context, id string) (string, bool, error) {
			host, _, ok, err := fleet.Locate(ctx, etcd, "", id)
			if !ok || err != nil || host == h.name {
				return "", false, err
			}
			return peerOf(host), true, nil
		},
		MoveTarget: func(ctx context.Context, to string, memoryMiB int) (string, string, error) {
			return other, peerOf(other), nil
		},
	})
	h.srv = httptest.NewServer(server.Handler())
	h.peerSrv = httptest.NewUnstartedServer(server.PeerHandler())
	h.peerSrv.TLS = tlsCfg.Server
	h.peerSrv.StartTLS()
	h.peer = strings.TrimPrefix(h.peerSrv.URL, "https://")
	h.c = client.New(h.srv.URL, token)
	h.member, err = fleet.Join(ctx, etcd, "", fleet.Host{Name: h.name, Address: h.peer, Peer: h.peer, MemoryMiB: 1 << 20, MaxDesktops: 8}, 10*time.Second)
	return err
}

// moveSuite times live moves of one desktop of the run's snapshot between
// two hosts of this process ("s" and "t", each its own QEMU driver and
// Manager, their records in the run's etcd, the stream over the fleet's
// mutual TLS), back and forth: moveSamples with the desktop idle, then
// moveSamples while an agent types into it through the source's API
// (whose requests wait for the switch, then go to the new host).
//   - fleet_move_{idle,busy}_total: the move's answer, from the request;
//   - fleet_move_{idle,busy}_stopped: the guest stood still, as hostd
//     measured it (QEMU's downtime, then the switch to the new host);
//   - fleet_move_{idle,busy}_guest_pause: the same as the guest's own
//     clock saw it: a guest loop writes its clock every 50 ms, and the
//     longest two steps (the guest's clock is set again after the move)
//     less two usual ones;
//   - fleet_move_{idle,busy}_held: how long the desktop's requests waited;
//   - fleet_move_{idle,busy}_sent_mib: state and disk sent, p50.
func (e *env) moveSuite(ctx context.Context, etcd *clientv3.Client, token string) error {
	hosts, err := e.moveHosts(ctx, etcd, token)
	if err != nil {
		return err
	}
	defer func() {
		for _, h := range hosts {
			h.close()
		}
	}()
	d, err := hosts["s"].c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: e.snap.Name})
	if err != nil {
		return fmt.Errorf("create on s: %w", err)
	}
	ticks := "nohup sh -c 'while :; do date +%s%N; sleep 0.05; done >> /tmp/ticks' >/dev/null 2>&1 &"
	if out, err := hosts["s"].c.Exec(ctx, d.ID, api.ExecRequest{Shell: ticks}); err != nil || out.ExitCode != 0 {
		return fmt.Errorf("start the guest's clock loop: %+v, %w", out, err)
	}
	// The guest pause is read from the loop's readings around a move:
	// the first move waits for some before it.
	if err := waitTicks(ctx, hosts["s"].c, d.ID, 10); err != nil {
		return err
	}
	from, to := hosts["s"], hosts["t"]
	for _, busy := range []bool{false, true} {
		kind := map[bool]string{false: "idle", true: "busy"}[busy]
		var total, stopped, pause, held Dist
		var sent []float64
		for range moveSamples {
			before := len(guestTicks(ctx, from.c, d.ID))
			stop := make(chan struct{})
			typed := make(chan error, 1)
			if busy {
				go typeUntil(ctx, from.c, d.ID, stop, typed)
			} else {
				typed <- nil
			}
			start := time.Now()
			m, err := from.c.MoveDesktop(ctx, d.ID, to.name)
			took := time.Since(start)
			close(stop)
			if err != nil {
				return fmt.Errorf("move %s from %s to %s: %w", kind, from.name, to.name, err)
			}
			if err := <-typed; err != nil {
				return fmt.Errorf("typing during a move: %w", err)
			}
			total.Add(took)
			stopped.Add(time.Duration(m.DowntimeMs+m.SwitchMs) * time.Millisecond)
			held.Add(time.Duration(m.HeldMs) * time.Millisecond)
			sent = append(sent, float64(m.StateBytes+m.DiskBytes)/(1<<20))
			p, err := e.guestPause(ctx, to.c, d.ID, before)
			if err != nil {
				return err
			}
			pause.Add(p)
			from, to = to, from
		}
		e.res.dist("fleet_move_"+kind+"_total", &total)
		e.res.dist("fleet_move_"+kind+"_stopped", &stopped)
		e.res.dist("fleet_move_"+kind+"_guest_pause", &pause)
		e.res.dist("fleet_move_"+kind+"_held", &held)
		slices.Sort(sent)
		e.res.set("fleet_move_"+kind+"_sent_mib", sent[len(sent)/2])
	}
	return nil
}

// typeUntil types lines into the desktop's shell through c until stop,
// then says how it went.
func typeUntil(ctx context.Context, c *client.Client, id string, stop <-chan struct{}, done chan<- error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			done <- nil
			return
		default:
		}
		batch := input.Batch{{Kind: input.KindType, Text: "echo busy " + strconv.Itoa(i) + "\n"}}
		if _, err := c.Actions(ctx, id, api.ActionsRequest{Actions: batch}); err != nil {
			done <- err
			return
		}
	}
}

// guestTicks are the guest clock loop's readings, in nanoseconds.
func guestTicks(ctx context.Context, c *client.Client, id string) []int64 {
	var b bytes.Buffer
	c.ReadFile(ctx, id, "/tmp/ticks", &b)
	var out []int64
	for _, f := range strings.Fields(b.String()) {
		if v, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// waitTicks waits, up to 30 s, until the guest's clock loop has written
// n readings.
func waitTicks(ctx context.Context, c *client.Client, id string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := len(guestTicks(ctx, c, id))
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest's clock loop wrote %d of %d readings in 30 s", got, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// guestPause waits for the guest loop's next readings after a move and
// returns how long the guest stood still as its clock saw it.
func (e *env) guestPause(ctx context.Context, c *client.Client, id string, before int) (time.Duration, error) {
	if err := waitTicks(ctx, c, id, before+10); err != nil {
		return 0, fmt.Errorf("after a move: %w", err)
	}
	ticks := guestTicks(ctx, c, id)
	ticks = ticks[max(0, before-5):]
	var steps []int64
	for i := 1; i < len(ticks); i++ {
		steps = append(steps, ticks[i]-ticks[i-1])
	}
	usual := slices.Clone(steps)
	slices.Sort(usual)
	var longest int64
	for i := 1; i < len(ticks)-1; i++ {
		longest = max(longest, ticks[i+1]-ticks[i-1])
	}
	return time.Duration(max(0, longest-2*usual[len(usual)/2])), nil
}
