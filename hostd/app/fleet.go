package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/internal/fanout"
	"github.com/warmdesk/warmdesk/internal/tokenfile"
	"github.com/warmdesk/warmdesk/web"
)

// fleetHost is this hostd's part in a fleet (--cluster-name): its etcd
// member, its client, its records in etcd, and its membership once it
// serves. It is the App's records store: closing it leaves the fleet.
type fleetHost struct {
	*fleet.Records
	prefix string // the fleet's keys in etcd
	cfg    config.Cluster
	self   fleet.Peer
	member *fleet.Member
	client *clientv3.Client
	log    *slog.Logger

	mu         sync.Mutex
	membership *fleet.Membership
	stopUpdate context.CancelFunc

	// token is the fleet's daemon token, for pulls from other hosts.
	tokenMu sync.Mutex
	token   string
	// stopWatch ends the watch of the fleet's token.
	stopWatch context.CancelFunc
	// generation is this start's (startGeneration).
	generation uint64
	// pullMu lets one pull run at a time.
	pullMu sync.Mutex
	// pulls hears how this host's pulls go, for GET /v1/events.
	pulls fanout.Broker[api.Event]
}

// pullEventEvery spaces a pull's progress events: a pull of a GiB would
// otherwise tell every 32 KiB.
const pullEventEvery = 250 * time.Millisecond

// tellPull publishes an event of a pull.
func (f *fleetHost) tellPull(typ string, p api.SnapshotPull, summary string) {
	f.pulls.Publish(api.Event{Type: typ, Pull: &p, Host: f.cfg.Host, Time: time.Now().UTC(), Summary: summary})
}

// pullProgress returns the Progress of a pull from host from: an event
// at its start, then at most one per pullEventEvery, and at its end.
func (f *fleetHost) pullProgress(from string) func(fleet.PullProgress) {
	var last time.Time
	return func(p fleet.PullProgress) {
		if now := time.Now(); p.Done == 0 || p.Done == p.Total || now.Sub(last) >= pullEventEvery {
			last = now
			f.tellPull(api.EventPulling, api.SnapshotPull{Snapshot: p.Snapshot, From: from, File: p.File, Bytes: p.Done, Total: p.Total}, "")
		}
	}
}

// pullEvents subscribes to this host's pull events.
func (f *fleetHost) pullEvents() (<-chan api.Event, func()) { return f.pulls.Subscribe() }

// memberWait bounds how long a starting host waits for a majority of its
// peers: the first hosts of a fleet wait for the others.
const memberWait = 5 * time.Minute

// openFleet starts this host's etcd member and connects to the fleet, or
// connects to an existing etcd (--etcd-endpoints).
func openFleet(ctx context.Context, cfg config.Serve, log *slog.Logger) (*fleetHost, error) {
	if err := refuseSingleHostRecords(cfg.Records()); err != nil {
		return nil, err
	}
	c := cfg.Cluster
	if c.Endpoints != "" {
		return connectFleet(ctx, c, log)
	}
	peers, err := fleet.ParsePeers(c.Peers, c.PeerPort, c.ClientPort, true)
	if err != nil {
		return nil, err
	}
	tls := fleet.HostTLS(c.Certs, c.Host)
	for _, f := range []string{tls.CA, tls.Cert, tls.Key} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("fleet: %w: make the certificates with hostd cluster certs and copy ca.pem, %s.pem and %s-key.pem into --cluster-certs", err, c.Host, c.Host)
		}
	}
	var self fleet.Peer
	for _, p := range peers {
		if p.Name == c.Host {
			self = p
		}
	}
	log.Info("starting this host's etcd member; it waits for a majority of the fleet's hosts", "cluster", c.Name, "host", c.Host, "peers", len(peers))
	mctx, cancel := context.WithTimeout(ctx, memberWait)
	defer cancel()
	member, err := fleet.StartMember(mctx, fleet.MemberConfig{Cluster: c.Name, Name: c.Host, Peers: peers, DataDir: filepath.Join(cfg.StateDir, "etcd"), TLS: tls})
	if err != nil {
		return nil, err
	}
	client, err := fleet.Connect(mctx, member.Endpoints(), tls)
	if err != nil {
		member.Close()
		return nil, err
	}
	return newFleetHost(c, self, member, client, log), nil
}

// connectFleet joins a fleet whose records are in an existing etcd.
func connectFleet(ctx context.Context, c config.Cluster, log *slog.Logger) (*fleetHost, error) {
	var tls *fleet.TLSFiles
	if c.EtcdCA != "" {
		tls = &fleet.TLSFiles{CA: c.EtcdCA, Cert: c.EtcdCert, Key: c.EtcdKey}
	}
	endpoints := strings.Split(c.Endpoints, ",")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client, err := fleet.Connect(cctx, endpoints, tls)
	if err != nil {
		return nil, err
	}
	log.Info("this host's fleet records are in an existing etcd", "cluster", c.Name, "host", c.Host, "endpoints", endpoints)
	return newFleetHost(c, fleet.Peer{Name: c.Host, ClientURL: endpoints[0]}, nil, client, log), nil
}

// refuseSingleHostRecords refuses to make a fleet host of a state
// directory whose single-host records hold desktops or volumes: in a
// fleet the records are in etcd, so they would not be found, and the
// sweep at start would end the desktops' machines.
func refuseSingleHostRecords(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	st, err := store.Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := st.LoadDesktops()
	if err != nil {
		return err
	}
	vs, err := st.LoadVolumes()
	if err != nil {
		return err
	}
	if len(ds) > 0 || len(vs) > 0 {
		return fmt.Errorf("fleet: %s holds %d desktops and %d volumes of this host as a single host, which a fleet host would not find (its records are in etcd), and the desktops' machines it would end: delete them with hostd started without --cluster-name, or use another --state-dir", path, len(ds), len(vs))
	}
	return nil
}

// newFleetHost is this host's part in the fleet named c.Name, whose keys
// are under a prefix of its own: fleets sharing an etcd stay apart.
func newFleetHost(c config.Cluster, self fleet.Peer, member *fleet.Member, client *clientv3.Client, log *slog.Logger) *fleetHost {
	prefix := fleet.DefaultPrefix + c.Name + "/"
	return &fleetHost{Records: fleet.NewRecords(client, c.Host, prefix), prefix: prefix, cfg: c, self: self, member: member, client: client, log: log}
}

// startGeneration takes this start's generation: the fleet shows the
// desktop records of earlier ones host_lost until reconcile.
func (f *fleetHost) startGeneration(ctx context.Context) error {
	gen, err := f.StartGeneration(ctx)
	if err != nil {
		return err
	}
	f.generation = gen
	f.log.Info("this host's generation in the fleet", "host", f.cfg.Host, "generation", gen)
	return nil
}

// reconcile, once recovery has run, writes this host's records of earlier
// generations again as m holds each desktop now: the others show them as
// they are again.
func (f *fleetHost) reconcile(ctx context.Context, m *desktop.Manager) error {
	n, dropped, err := f.Reconcile(ctx, func(id string) (desktop.Desktop, bool) {
		d, err := m.Get(id)
		return d, err == nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		f.log.Info("reconciled the desktop records of this host's earlier generations", "records", n, "generation", f.generation)
	}
	if len(dropped) > 0 {
		f.log.Warn("deleted desktop records of this host that its recovery dropped", "desktops", dropped)
	}
	return nil
}

// join puts this host in the fleet's membership, at the address it
// advertises, and keeps its load there up to date while ctx lasts.
func (f *fleetHost) join(ctx context.Context, listen string, describe func() fleet.Host) error {
	advertise, err := advertiseAddress(f.cfg.Advertise, listen, f.self.Address())
	if err != nil {
		return err
	}
	host := func() fleet.Host {
		h := describe()
		h.Name, h.Address, h.Generation = f.cfg.Host, advertise, f.generation
		return h
	}
	m, err := fleet.Join(ctx, f.client, f.prefix, host(), f.cfg.Lease)
	if err != nil {
		return err
	}
	uctx, stop := context.WithCancel(ctx)
	f.mu.Lock()
	f.membership, f.stopUpdate = m, stop
	f.mu.Unlock()
	go f.keepJoined(uctx, m, host)
	return nil
}

// keepJoined refreshes this host's load a few times per lease (placement
// reads it), and joins again when the lease ran out (etcd was out of
// reach for longer than the lease): the others list the host again once
// it is back.
func (f *fleetHost) keepJoined(ctx context.Context, m *fleet.Membership, host func() fleet.Host) {
	t := time.NewTicker(f.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Lost():
			f.log.Error("this host's lease in the fleet ran out (etcd out of reach for longer than --cluster-lease); joining again")
			if m = f.rejoin(ctx, host); m == nil {
				return
			}
		case <-t.C:
			if err := m.Update(ctx, host()); err != nil && ctx.Err() == nil {
				f.log.Warn("update this host in the fleet", "err", err)
			}
		}
	}
}

// rejoin joins the fleet again, trying once per lease until it can or
// ctx ends (nil then).
func (f *fleetHost) rejoin(ctx context.Context, host func() fleet.Host) *fleet.Membership {
	for {
		m, err := fleet.Join(ctx, f.client, f.prefix, host(), f.cfg.Lease)
		if err == nil {
			f.mu.Lock()
			f.membership = m
			f.mu.Unlock()
			f.log.Info("this host is in the fleet again")
			return m
		}
		f.log.Warn("join the fleet again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.cfg.Lease):
		}
	}
}

// adoptFleetToken makes the fleet's shared daemon token this host's, and
// keeps it in the token file for the CLI.
func (a *App) adoptFleetToken(ctx context.Context) error {
	shared, err := fleet.SharedToken(ctx, a.fleet.client, a.fleet.prefix, a.Token)
	if err != nil {
		return err
	}
	a.fleet.setFleetToken(shared)
	if shared == a.Token {
		return nil
	}
	if err := tokenfile.WriteWhole(a.cfg.TokenFile(), []byte(shared+"\n")); err != nil {
		return fmt.Errorf("keep the fleet's token: %w", err)
	}
	a.Token, a.NewToken = shared, false
	return nil
}

func (f *fleetHost) fleetToken() string {
	f.tokenMu.Lock()
	defer f.tokenMu.Unlock()
	return f.token
}

func (f *fleetHost) setFleetToken(tok string) {
	f.tokenMu.Lock()
	f.token = tok
	f.tokenMu.Unlock()
}

// rotateToken makes a new daemon token for the whole fleet, in etcd, if
// the token there is still the one this host has: every host, this one
// included, takes it from there (followToken). The API's check here takes
// it when this returns, and the token file is written at once too, for
// the caller to read.
func (f *fleetHost) rotateToken(path string) (string, error) {
	tok, old := tokenfile.New(), f.fleetToken()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fleet.SetSharedToken(ctx, f.client, f.prefix, old, tok); err != nil {
		return "", err
	}
	// Unless the watch has already brought a later rotation (from
	// another host), which this one must not undo.
	f.keepToken(path, old, tok)
	return tok, nil
}

// keepToken makes tok this host's fleet token, if it is still from (any
// token when from is empty), and writes it to the token file; a failed
// write is logged (the token holds all the same: the API checks it and
// the fleet has it).
func (f *fleetHost) keepToken(path, from, tok string) {
	f.tokenMu.Lock()
	defer f.tokenMu.Unlock()
	if f.token == tok || (from != "" && f.token != from) {
		return
	}
	f.token = tok
	if err := tokenfile.WriteWhole(path, []byte(tok+"\n")); err != nil {
		f.log.Error("keep the fleet's rotated token in this host's token file: the CLI here needs it by hand", "err", err)
	}
}

// followToken takes the fleet's token each time any host rotates it:
// into path, f, and adopt (the API's check, which ignores a token it
// has), until Close.
func (f *fleetHost) followToken(path string, adopt func(string)) {
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.stopWatch = cancel
	f.mu.Unlock()
	go fleet.WatchToken(ctx, f.client, f.prefix, func(tok string) {
		f.keepToken(path, "", tok)
		adopt(tok)
	})
}

// locate finds the API address of the host that runs a desktop.
func (f *fleetHost) locate(ctx context.Context, id string) (string, bool, error) {
	host, addr, ok, err := fleet.Locate(ctx, f.client, f.prefix, id)
	if err != nil || !ok || host == f.cfg.Host {
		return "", false, err
	}
	return addr, true, nil
}

// place chooses the host for a new desktop of snapshot and holds its room
// there until release.
func (f *fleetHost) place(ctx context.Context, snapshot string) (string, bool, func(), error) {
	p, err := fleet.Place(ctx, f.client, f.prefix, snapshot, desktop.NewID("p-"))
	if err != nil {
		return "", false, nil, err
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Release(ctx); err != nil {
			f.log.Warn("release a placement (its lease will)", "err", err)
		}
	}
	return p.Host.Address, p.Host.Name == f.cfg.Host, release, nil
}

// others lists the desktops the fleet's other hosts run.
func (f *fleetHost) others(ctx context.Context) ([]web.RemoteDesktop, error) {
	all, err := fleet.Desktops(ctx, f.client, f.prefix)
	if err != nil {
		return nil, err
	}
	var out []web.RemoteDesktop
	for _, d := range all {
		if d.Host != f.cfg.Host {
			out = append(out, web.RemoteDesktop{Host: d.Host, Lost: d.Lost, Desktop: d.Desktop})
		}
	}
	return out, nil
}

// peers lists the API addresses of the fleet's other live hosts.
func (f *fleetHost) peers(ctx context.Context) ([]string, error) {
	hosts, err := fleet.Hosts(ctx, f.client, f.prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hosts {
		if h.Name != f.cfg.Host {
			out = append(out, h.Address)
		}
	}
	return out, nil
}

// ensureSnapshot makes sure this host holds snapshot name before a create:
// when it does not, it pulls the files from a host that holds it, and the
// snapshots it is layered on first (one pull at a time per host; later
// creates wait for it, and then find it).
func (f *fleetHost) ensureSnapshot(ctx context.Context, cat *desktop.Catalog, shape desktop.MachineShape, hasImage func(hash string) bool, name string) error {
	if _, err := cat.Get(name); err == nil {
		return nil
	}
	f.pullMu.Lock()
	defer f.pullMu.Unlock()
	shape.Devices = nil // the devices are the snapshot's own
	return f.pull(ctx, cat, shape, hasImage, name, 0)
}

// maxLayers bounds a chain of layered snapshots pulled for one create.
const maxLayers = 16

// pull pulls name (with f.pullMu held) unless it is here already.
func (f *fleetHost) pull(ctx context.Context, cat *desktop.Catalog, shape desktop.MachineShape, hasImage func(hash string) bool, name string, depth int) error {
	if _, err := cat.Get(name); err == nil {
		return nil // pulled while this one waited, or a parent already here
	}
	if depth > maxLayers {
		return fmt.Errorf("%w: snapshot %s is layered more than %d deep", desktop.ErrInvalid, name, maxLayers)
	}
	hosts, err := fleet.Hosts(ctx, f.client, f.prefix)
	if err != nil {
		return err
	}
	var from *fleet.Host
	for i, h := range hosts {
		if _, ok := h.Holds(name); ok && h.Name != f.cfg.Host {
			from = &hosts[i]
			break
		}
	}
	if from == nil {
		return nil // no host has it: the create says so
	}
	p := fleet.Puller{
		HTTP:  &http.Client{Transport: &http.Transport{Proxy: nil}},
		Token: f.fleetToken(),
		Accept: func(m *desktop.Manifest) error {
			if diffs := m.Machine.Mismatch(shape); len(diffs) > 0 {
				return fmt.Errorf("%w: it does not restore on this host: %s", desktop.ErrMismatch, strings.Join(diffs, "; "))
			}
			// Its disk layers on its image's, by the image's place in
			// the cache: the image moves by being built, not pulled.
			if m.Image.Hash != "" && !hasImage(m.Image.Hash) {
				return fmt.Errorf("%w: its disk layers on image %s (%s, flavor %s), which this host has not built: build it here (hostd image build --flavor %s) or create on a host that has it", desktop.ErrMismatch, m.Image.Name, m.Image.Hash[:min(12, len(m.Image.Hash))], m.Image.Flavor, m.Image.Flavor)
			}
			return nil
		},
		EnsureParent: func(ctx context.Context, parent string) error {
			return f.pull(ctx, cat, shape, hasImage, parent, depth+1)
		},
		Progress: f.pullProgress(from.Name),
	}
	f.log.Info("pulling a snapshot from another host of the fleet", "snapshot", name, "from", from.Name)
	s, stats, err := p.Pull(ctx, from.Address, name, cat)
	if err != nil {
		f.tellPull(api.EventPullFailed, api.SnapshotPull{Snapshot: name, From: from.Name, Bytes: stats.Bytes}, err.Error())
		return err
	}
	f.tellPull(api.EventPulled, api.SnapshotPull{Snapshot: name, From: from.Name, Bytes: stats.Bytes, Total: stats.Bytes},
		fmt.Sprintf("%d MiB in %s", stats.Bytes>>20, stats.Duration.Round(time.Millisecond)))
	f.log.Info("pulled a snapshot", "snapshot", s.Name, "from", from.Name, "bytes", stats.Bytes, "took", stats.Duration, "resumed", stats.Resumed,
		"mib_per_s", float64(stats.Bytes)/(1<<20)/stats.Duration.Seconds())
	return nil
}

// drain stops (or restarts) placing new desktops on a host.
func (f *fleetHost) drain(ctx context.Context, host string, on bool) error {
	return fleet.Drain(ctx, f.client, f.prefix, host, on)
}

// status lists the fleet's live hosts.
func (f *fleetHost) status(ctx context.Context) (api.Fleet, error) {
	hosts, err := fleet.Hosts(ctx, f.client, f.prefix)
	if err != nil {
		return api.Fleet{}, err
	}
	out := api.Fleet{Name: f.cfg.Name, Self: f.cfg.Host, Hosts: []api.FleetHost{}}
	if leader, err := fleet.Leader(ctx, f.client, f.self.ClientURL); err == nil {
		out.Leader = leader
	} else {
		f.log.Warn("etcd's leader unknown", "err", err)
	}
	for _, h := range hosts {
		fh := api.FleetHost{
			Name: h.Name, Address: h.Address, Generation: h.Generation, MemoryMiB: h.MemoryMiB, MaxDesktops: h.MaxDesktops,
			UsedMemoryMiB: h.UsedMemoryMiB, Desktops: h.Desktops,
			QEMU: h.Restore.QEMU, Machine: h.Restore.Machine, Accel: h.Restore.Accel, Draining: h.Draining,
		}
		for _, s := range h.Snapshots {
			fh.Snapshots = append(fh.Snapshots, s.Name)
		}
		out.Hosts = append(out.Hosts, fh)
	}
	return out, nil
}

// Close leaves the fleet and stops the member. A host that is killed
// instead leaves when its lease runs out.
func (f *fleetHost) Close() error {
	f.mu.Lock()
	m, stop, stopWatch := f.membership, f.stopUpdate, f.stopWatch
	f.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
	if m != nil {
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.Leave(ctx); err != nil {
			f.log.Warn("leave the fleet", "err", err)
		}
		cancel()
	}
	f.client.Close()
	if f.member != nil {
		f.member.Close()
	}
	return nil
}

// describeHost is what this host says of itself in the fleet: its caps,
// its load, what it restores, which snapshots it holds and how many
// machines of each its warm pool holds ready.
func describeHost(m *desktop.Manager) fleet.Host {
	lim := m.Limits()
	shape := m.Driver().Shape()
	h := fleet.Host{
		MemoryMiB: lim.MaxMemoryMiB, MaxDesktops: lim.MaxDesktops,
		Restore: fleet.RestoreKey{QEMU: shape.QEMUVersion + "/" + shortSum(shape.QEMUSHA256), Machine: shape.Type, Accel: shape.Accel},
	}
	for _, d := range m.List() {
		if d.State.Holds() {
			h.Desktops++
			h.UsedMemoryMiB += d.Resources.MemoryMiB
		}
	}
	warmer, _ := m.Driver().(desktop.Warmer)
	if snaps, _, err := m.Catalog().List(); err == nil {
		for _, s := range snaps {
			held := fleet.HeldSnapshot{Name: s.Name, MemoryMiB: s.Manifest.Machine.MemoryMiB}
			if warmer != nil {
				held.Warm = warmer.PoolSize(s.Name)
			}
			h.Snapshots = append(h.Snapshots, held)
		}
		slices.SortFunc(h.Snapshots, func(a, b fleet.HeldSnapshot) int { return strings.Compare(a.Name, b.Name) })
	}
	return h
}

func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// advertiseAddress is the API address other hosts are told: --cluster-
// advertise when given, else the address hostd listens on, or, when that
// is every address of the machine (0.0.0.0, ::), its peer address with
// the same port.
func advertiseAddress(flag, listen, peerAddr string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("fleet: the address hostd listens on: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if peerAddr == "" {
			return "", fmt.Errorf("fleet: hostd listens on every address (%s) and has no peer address to advertise: give --cluster-advertise HOST:PORT", listen)
		}
		return net.JoinHostPort(peerAddr, port), nil
	}
	return listen, nil
}
