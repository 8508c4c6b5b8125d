package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/web"
)

// fleetSamples is how many of each proxied call are timed, fleetCreates
// how many creates each way.
const (
	fleetSamples = 30
	fleetCreates = 10
)

// benchPlacer places creates made to host self, as hostd's fleet does.
func benchPlacer(etcd *clientv3.Client, self string) web.Placer {
	return func(ctx context.Context, snapshot string) (string, bool, func(), error) {
		p, err := fleet.Place(ctx, etcd, "", snapshot, desktop.NewID("p-"))
		if err != nil {
			return "", false, nil, err
		}
		return p.Host.Address, p.Host.Name == self, func() { p.Release(context.WithoutCancel(ctx)) }, nil
	}
}

// fleetSuite measures what being one host of a fleet costs, in process,
// over this machine's loopback: three etcd members on 127.0.0.31 to .33
// (no TLS), host "b" the run's own QEMU Manager behind the API, host "a"
// an API whose Manager (on the fake driver) runs nothing, so every request
// for a desktop it is given is passed to b by the fleet's proxy:
//   - fleet_get_direct, fleet_get_proxied and fleet_get_proxied_tls: GET
//     /v1/desktops/ID to b, through a, and through a second a that calls
//     b's peer handler over the fleet's mutual TLS as hosts of a fleet
//     do, interleaved (the proxy's own cost, and what TLS adds to it);
//   - fleet_create_direct and fleet_create_proxied: creates placed on b
//     (an etcd transaction), made to b and made to a (which passes them
//     on), alternating, each to its answer (cold restores: the run's pool
//     is off, so their spread is the restore's);
//   - fleet_placements_per_s: three placers choosing among three hosts at
//     once, each placement a reservation committed and released;
//   - fleet_pull: the snapshot pulled from b into a catalog of its own, as
//     a host that lacks it does before its first create;
//   - fleet_first_create_pulling and fleet_create_after_pull: on a host
//     that lacks the snapshot, its first create (the pull, then the
//     restore) and its second.
func (e *env) fleetSuite(ctx context.Context) error {
	members, endpoints, etcdDir, err := startBenchEtcd(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, m := range members {
			m.Close()
		}
		os.RemoveAll(etcdDir)
	}()
	etcd, err := fleet.Connect(ctx, endpoints, nil)
	if err != nil {
		return err
	}
	defer etcd.Close()

	const token = "bench-token"
	// b: the run's Manager, its desktops' records put in the fleet's etcd
	// as b's own store would.
	bRecords := fleet.NewRecords(etcd, "b", "")
	svc := drive.New(ctx, drive.Config{Manager: e.mgr, Screens: e.screens, Logger: e.log})
	b := web.New(web.Config{Manager: e.mgr, Drive: svc, Token: token, Logger: e.log, HostName: "b",
		Fleet: func(context.Context) (api.Fleet, error) { return api.Fleet{Name: "bench"}, nil },
		Place: benchPlacer(etcd, "b")})
	bSrv := httptest.NewServer(b.Handler())
	defer bSrv.Close()
	bAddr := strings.TrimPrefix(bSrv.URL, "http://")
	held := []fleet.HeldSnapshot{{Name: e.snap.Name, MemoryMiB: e.snap.Manifest.Machine.MemoryMiB}}
	bm, err := fleet.Join(ctx, etcd, "", fleet.Host{Name: "b", Address: bAddr, Peer: bAddr, MemoryMiB: 1 << 20, MaxDesktops: 64, Snapshots: held}, 10*time.Second)
	if err != nil {
		return err
	}
	defer bm.Leave(context.WithoutCancel(ctx))

	// a: runs nothing; it locates and places through the fleet.
	fake := desktoptest.NewFake()
	aMgr := desktop.NewManager(ctx, desktop.Config{Driver: fake, Store: desktoptest.NewMemStore(), Catalog: e.cat, Logger: e.log, Limits: desktop.DefaultLimits()})
	defer aMgr.Close()
	aSrv := httptest.NewServer(web.New(web.Config{Manager: aMgr, Drive: drive.New(ctx, drive.Config{Manager: aMgr, Logger: e.log}), Token: token, Logger: e.log, HostName: "a",
		Locate: func(ctx context.Context, id string) (string, bool, error) {
			host, addr, ok, err := fleet.Locate(ctx, etcd, "", id)
			return addr, ok && host != "a", err
		},
		Place: benchPlacer(etcd, "a"),
	}).Handler())
	defer aSrv.Close()
	direct, viaA := client.New(bSrv.URL, token), client.New(aSrv.URL, token)

	// Creates, alternating; both placed (every create of a fleet is), on
	// b, the snapshot's one holder: made to b it runs there, made to a it
	// is passed on. Each deleted after (not timed).
	var createDirect, createProxied Dist
	var lastID string
	for i := range 2 * fleetCreates {
		c, dist := direct, &createDirect
		if i%2 == 1 {
			c, dist = viaA, &createProxied
		}
		start := time.Now()
		d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: e.snap.Name})
		if err != nil {
			return fmt.Errorf("create (through %s): %w", map[bool]string{true: "a", false: "b"}[i%2 == 1], err)
		}
		dist.Add(time.Since(start))
		if i < 2*fleetCreates-2 {
			e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
		} else {
			lastID = d.ID
		}
	}
	e.res.dist("fleet_create_direct", &createDirect)
	e.res.dist("fleet_create_proxied", &createProxied)
	e.res.set("fleet_create_proxy_added_ms", ms(createProxied.Percentile(50))-ms(createDirect.Percentile(50)))

	// The proxy's own cost, on a call that does little.
	d, err := e.mgr.Get(lastID)
	if err != nil {
		return err
	}
	if err := bRecords.PutDesktop(d); err != nil {
		return err
	}
	viaATLS, stopTLS, err := e.proxyOverTLS(ctx, etcd, b, token)
	if err != nil {
		return err
	}
	defer stopTLS()
	var getDirect, getProxied, getProxiedTLS Dist
	for i := range 3 * fleetSamples {
		c, dist := []*client.Client{direct, viaA, viaATLS}[i%3], []*Dist{&getDirect, &getProxied, &getProxiedTLS}[i%3]
		start := time.Now()
		if _, err := c.Desktop(ctx, lastID); err != nil {
			return fmt.Errorf("get a desktop (%s): %w", []string{"direct", "proxied", "proxied over TLS"}[i%3], err)
		}
		dist.Add(time.Since(start))
	}
	e.res.dist("fleet_get_direct", &getDirect)
	e.res.dist("fleet_get_proxied", &getProxied)
	e.res.dist("fleet_get_proxied_tls", &getProxiedTLS)
	e.res.set("fleet_proxy_added_ms", ms(getProxied.Percentile(50))-ms(getDirect.Percentile(50)))
	e.res.set("fleet_proxy_tls_added_ms", ms(getProxiedTLS.Percentile(50))-ms(getDirect.Percentile(50)))
	e.mgr.Delete(context.WithoutCancel(ctx), lastID)
	bRecords.DeleteDesktop(lastID)

	if err := e.placementRate(ctx, endpoints); err != nil {
		return err
	}
	if err := e.pullRate(ctx, bAddr, token); err != nil {
		return err
	}
	if err := e.moveSuite(ctx, etcd, token); err != nil {
		return fmt.Errorf("moves: %w", err)
	}
	return e.firstCreatePulling(ctx, bAddr, token)
}

// proxyOverTLS serves b's peer handler over the fleet's mutual TLS
// (certificates made for the run) and returns a client of a second "a"
// that passes every request to it over that TLS, as hosts of a fleet do;
// it locates the desktop in etcd as the first "a" does, so the two
// differ by the TLS alone.
func (e *env) proxyOverTLS(ctx context.Context, etcd *clientv3.Client, b *web.Server, token string) (*client.Client, func(), error) {
	dir, err := os.MkdirTemp("", "bench-fleet-certs-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if err := fleet.WriteCerts(dir, "bench", []fleet.CertHost{{Name: "a", Addrs: []string{"127.0.0.1"}}, {Name: "b", Addrs: []string{"127.0.0.1"}}}, time.Now()); err != nil {
		return nil, nil, err
	}
	aTLS, err := fleet.LoadPeerTLS(fleet.HostTLS(dir, "a"))
	if err != nil {
		return nil, nil, err
	}
	bTLS, err := fleet.LoadPeerTLS(fleet.HostTLS(dir, "b"))
	if err != nil {
		return nil, nil, err
	}
	bPeers := httptest.NewUnstartedServer(b.PeerHandler())
	bPeers.TLS = bTLS.Server
	bPeers.StartTLS()
	bPeerAddr := strings.TrimPrefix(bPeers.URL, "https://")
	fake := desktoptest.NewFake()
	aMgr := desktop.NewManager(ctx, desktop.Config{Driver: fake, Store: desktoptest.NewMemStore(), Catalog: e.cat, Logger: e.log, Limits: desktop.DefaultLimits()})
	aSrv := httptest.NewServer(web.New(web.Config{Manager: aMgr, Drive: drive.New(ctx, drive.Config{Manager: aMgr, Logger: e.log}), Token: token, Logger: e.log, HostName: "a",
		PeerTLS: aTLS.Client,
		Locate: func(ctx context.Context, id string) (string, bool, error) {
			host, _, ok, err := fleet.Locate(ctx, etcd, "", id)
			return bPeerAddr, ok && host != "a", err
		},
	}).Handler())
	return client.New(aSrv.URL, token), func() { aSrv.Close(); aMgr.Close(); bPeers.Close() }, nil
}

// firstCreatePulling times, on a host "c" whose catalog lacks the snapshot
// (a Manager of its own on the run's QEMU driver), the first create, which
// pulls the snapshot from b before it restores, then a second, which does
// not.
func (e *env) firstCreatePulling(ctx context.Context, bAddr, token string) error {
	cat, remove, err := e.tempCatalog("host-c-")
	if err != nil {
		return err
	}
	defer remove()
	cMgr := desktop.NewManager(ctx, desktop.Config{Driver: e.drv, Store: desktoptest.NewMemStore(), Catalog: cat, Logger: e.log,
		Limits: desktop.Limits{MaxDesktops: 4, MaxMemoryMiB: 1 << 20, MaxFork: 1, MaxTTL: time.Hour, MaxDiskMiB: 1024}, Observer: e.screens})
	defer cMgr.Close()
	defer func() {
		for _, d := range cMgr.List() {
			cMgr.Delete(context.WithoutCancel(ctx), d.ID)
		}
	}()
	puller := fleet.Puller{HTTP: &http.Client{Transport: &http.Transport{Proxy: nil}}, Token: token}
	cSrv := httptest.NewServer(web.New(web.Config{Manager: cMgr, Drive: drive.New(ctx, drive.Config{Manager: cMgr, Screens: e.screens, Logger: e.log}), Token: token, Logger: e.log, HostName: "c",
		EnsureSnapshot: func(ctx context.Context, name string) error {
			if _, err := cat.Get(name); err == nil {
				return nil
			}
			_, _, err := puller.Pull(ctx, "http://"+bAddr, name, cat)
			return err
		}}).Handler())
	defer cSrv.Close()
	c := client.New(cSrv.URL, token)
	for _, key := range []string{"fleet_first_create_pulling_ms", "fleet_create_after_pull_ms"} {
		start := time.Now()
		d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: e.snap.Name})
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		e.res.set(key, ms(time.Since(start)))
		cMgr.Delete(context.WithoutCancel(ctx), d.ID)
	}
	return nil
}

// startBenchEtcd starts three members on 127.0.0.31 to .33, their data
// in dir (the caller removes it).
func startBenchEtcd(ctx context.Context) (started []*fleet.Member, endpoints []string, dir string, err error) {
	if dir, err = os.MkdirTemp("", "wdfleet"); err != nil {
		return nil, nil, "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	var peers []fleet.Peer
	for i := range 3 {
		addr := fmt.Sprintf("127.0.0.%d", 31+i)
		var ports [2]string
		for j := range ports {
			ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
			if err != nil {
				return nil, nil, "", fmt.Errorf("fleet suite: listen on %s (a loopback address): %w", addr, err)
			}
			_, ports[j], _ = net.SplitHostPort(ln.Addr().String())
			ln.Close()
		}
		peers = append(peers, fleet.Peer{Name: fmt.Sprintf("m%d", i+1), PeerURL: "http://" + addr + ":" + ports[0], ClientURL: "http://" + addr + ":" + ports[1]})
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	members := make([]*fleet.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members[i], errs[i] = fleet.StartMember(sctx, fleet.MemberConfig{Cluster: "bench", Name: peers[i].Name, Peers: peers, DataDir: filepath.Join(dir, peers[i].Name)})
		}()
	}
	wg.Wait()
	for i, m := range members {
		if errs[i] == nil {
			started = append(started, m)
		} else if err == nil {
			err = errs[i]
		}
	}
	if err != nil {
		for _, s := range started {
			s.Close()
		}
		return nil, nil, "", err
	}
	return started, started[0].Endpoints(), dir, nil
}

// placementRate is how many placements three placers, one client each,
// decide per second among three hosts: each a reservation committed in
// one transaction (tried again when another changed the loads) and
// released.
func (e *env) placementRate(ctx context.Context, endpoints []string) error {
	const window = 3 * time.Second
	prefix := "/wd-bench-place/"
	admin, err := fleet.Connect(ctx, endpoints, nil)
	if err != nil {
		return err
	}
	defer admin.Close()
	held := []fleet.HeldSnapshot{{Name: "s", MemoryMiB: 1024}}
	for _, name := range []string{"h1", "h2", "h3"} {
		m, err := fleet.Join(ctx, admin, prefix, fleet.Host{Name: name, Address: "127.0.0.1:1", MemoryMiB: 1 << 30, MaxDesktops: 1 << 20, Snapshots: held}, 10*time.Second)
		if err != nil {
			return err
		}
		defer m.Leave(context.WithoutCancel(ctx))
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var wg sync.WaitGroup
	for p := range 3 {
		c, err := fleet.Connect(ctx, endpoints, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		wg.Add(1)
		go func(c *clientv3.Client) {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				pl, err := fleet.Place(wctx, c, prefix, "s", fmt.Sprintf("d-%d-%d", p, i))
				if err != nil {
					if wctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				pl.Release(context.WithoutCancel(wctx))
				done.Add(1)
			}
		}(c)
	}
	start := time.Now()
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	e.res.set("fleet_placements_per_s", float64(done.Load())/time.Since(start).Seconds())
	admin.Delete(context.WithoutCancel(ctx), prefix, clientv3.WithPrefix())
	return nil
}

// pullRate pulls the run's snapshot from b, as a host lacking it does.
func (e *env) pullRate(ctx context.Context, bAddr, token string) error {
	dir, err := os.MkdirTemp(e.dataDir, "pulled-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cat, err := desktop.NewCatalog(dir)
	if err != nil {
		return err
	}
	p := fleet.Puller{HTTP: &http.Client{}, Token: token}
	_, stats, err := p.Pull(ctx, "http://"+bAddr, e.snap.Name, cat)
	if err != nil {
		return err
	}
	e.res.set("fleet_pull_ms", ms(stats.Duration))
	e.res.set("fleet_pull_mib", float64(stats.Bytes)/(1<<20))
	e.res.set("fleet_pull_mib_per_s", float64(stats.Bytes)/(1<<20)/stats.Duration.Seconds())
	return nil
}
