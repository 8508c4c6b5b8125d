package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/internal/fanout"
)

// NodeConfig is a fleet host's configuration (hostd serve's --cluster-*
// and --etcd-* flags, docs/FLEET.md).
type NodeConfig struct {
	// Cluster names the fleet; Host this host in it.
	Cluster, Host string
	// Peers, PeerPort and ClientPort start this host's embedded etcd
	// member; unused with Endpoints. Certs holds the fleet's
	// certificates, for etcd and the hosts' API.
	Peers, Certs         string
	PeerPort, ClientPort int
	// APIPort is where the hosts call each other's API (mutual TLS), on
	// the address hostd listens on; 0 picks a free port.
	APIPort int
	// Join starts this host's member into a running etcd that was told
	// of it (AddMember), rather than a new cluster.
	Join bool
	// Advertise is the API address other hosts are told, when not the one
	// hostd listens on.
	Advertise string
	// Endpoints, EtcdCA, EtcdCert and EtcdKey reach an existing etcd
	// instead of an embedded member.
	Endpoints, EtcdCA, EtcdCert, EtcdKey string
	// Lease is how long a host that stopped answering stays listed.
	Lease time.Duration
	// StateDir holds the embedded member's data (StateDir/etcd);
	// TokenFile is where the fleet's token is kept for the CLI.
	StateDir, TokenFile string
	Logger              *slog.Logger
}

// Node is one hostd's part in a fleet (--cluster-name): its etcd member,
// its client, its records in etcd, the fleet's shared token, its pulls,
// and its membership once it serves. It is hostd's records store: closing
// it leaves the fleet.
type Node struct {
	*Records
	prefix string // the fleet's keys in etcd
	cfg    NodeConfig
	self   Peer
	member *Member
	client *clientv3.Client
	log    *slog.Logger

	// Set by Attach: what this host says of itself, and what it pulls for.
	m        *desktop.Manager
	moves    *desktop.Moves
	limits   desktop.Limits
	hasImage func(hash string) bool

	mu         sync.Mutex
	membership *Membership
	stopUpdate context.CancelFunc

	// token is the fleet's daemon token, for pulls from other hosts.
	tokenMu sync.Mutex
	token   string
	// stopWatch ends the watch of the fleet's token.
	stopWatch context.CancelFunc
	// generation is this start's (StartGeneration).
	generation uint64
	// pullMu lets one pull run at a time.
	pullMu sync.Mutex
	// pulls hears how this host's pulls go, for GET /v1/events.
	pulls fanout.Broker[api.Event]
	// peerTLS is this host's side of the TLS between the hosts' APIs;
	// peerServer serves them (guarded by mu).
	peerTLS    PeerTLS
	peerServer *http.Server
}

// memberWait bounds how long a starting host waits for a majority of its
// peers: the first hosts of a fleet wait for the others.
const memberWait = 5 * time.Minute

// Open starts this host's etcd member and connects to the fleet, or
// connects to an existing etcd (Endpoints); makes the fleet's shared
// token this host's (ownToken when it is the first, kept in TokenFile
// otherwise); and takes this start's generation, before recovery.
func Open(ctx context.Context, c NodeConfig, ownToken string) (*Node, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Certs == "" {
		return nil, fmt.Errorf("fleet: no --cluster-certs: the fleet's hosts call each other's API over mutual TLS only; make the certificates with hostd cluster certs")
	}
	peerTLS, err := LoadPeerTLS(HostTLS(c.Certs, c.Host))
	if err != nil {
		return nil, err
	}
	var n *Node
	if c.Endpoints != "" {
		n, err = connectNode(ctx, c)
	} else {
		n, err = startNode(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	n.peerTLS = peerTLS
	if err := n.adoptToken(ctx, ownToken); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.startGeneration(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// startNode starts this host's embedded etcd member and connects to it.
func startNode(ctx context.Context, c NodeConfig) (*Node, error) {
	log := c.Logger
	peers, err := ParsePeers(c.Peers, c.PeerPort, c.ClientPort, true)
	if err != nil {
		return nil, err
	}
	tls := HostTLS(c.Certs, c.Host)
	for _, f := range []string{tls.CA, tls.Cert, tls.Key} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("fleet: %w: make the certificates with hostd cluster certs and copy ca.pem, %s.pem and %s-key.pem into --cluster-certs", err, c.Host, c.Host)
		}
	}
	var self Peer
	for _, p := range peers {
		if p.Name == c.Host {
			self = p
		}
	}
	log.Info("starting this host's etcd member; it waits for a majority of the fleet's hosts", "cluster", c.Cluster, "host", c.Host, "peers", len(peers))
	mctx, cancel := context.WithTimeout(ctx, memberWait)
	defer cancel()
	member, err := StartMember(mctx, MemberConfig{Cluster: c.Cluster, Name: c.Host, Peers: peers, DataDir: filepath.Join(c.StateDir, "etcd"), TLS: tls, Join: c.Join})
	if err != nil {
		return nil, err
	}
	client, err := Connect(mctx, member.Endpoints(), tls)
	if err != nil {
		member.Close()
		return nil, err
	}
	return newNode(c, self, member, client), nil
}

// connectNode joins a fleet whose records are in an existing etcd.
func connectNode(ctx context.Context, c NodeConfig) (*Node, error) {
	var tls *TLSFiles
	if c.EtcdCA != "" {
		tls = &TLSFiles{CA: c.EtcdCA, Cert: c.EtcdCert, Key: c.EtcdKey}
	}
	endpoints := strings.Split(c.Endpoints, ",")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client, err := Connect(cctx, endpoints, tls)
	if err != nil {
		return nil, err
	}
	c.Logger.Info("this host's fleet records are in an existing etcd", "cluster", c.Cluster, "host", c.Host, "endpoints", endpoints)
	return newNode(c, Peer{Name: c.Host, ClientURL: endpoints[0]}, nil, client), nil
}

// newNode is this host's part in the fleet named c.Cluster, whose keys
// are under a prefix of its own: fleets sharing an etcd stay apart.
func newNode(c NodeConfig, self Peer, member *Member, client *clientv3.Client) *Node {
	prefix := DefaultPrefix + c.Cluster + "/"
	return &Node{Records: NewRecords(client, c.Host, prefix), prefix: prefix, cfg: c, self: self, member: member, client: client, log: c.Logger}
}

// startGeneration takes this start's generation: the fleet shows the
// desktop records of earlier ones host_lost until Reconcile.
func (n *Node) startGeneration(ctx context.Context) error {
	gen, err := n.StartGeneration(ctx)
	if err != nil {
		return err
	}
	n.generation = gen
	n.log.Info("this host's generation in the fleet", "host", n.cfg.Host, "generation", gen)
	return nil
}

// Attach gives the node this host's Manager, once made: what the host
// says of itself (its limits, load and snapshots), what Reconcile writes,
// and where pulls land. hasImage says whether an image is built here.
// Call it before Reconcile, Join and EnsureSnapshot.
func (n *Node) Attach(m *desktop.Manager, lim desktop.Limits, hasImage func(hash string) bool) {
	n.m, n.limits, n.hasImage = m, lim, hasImage
	n.moves = desktop.NewMoves(m)
}

// Moves moves the attached Manager's running desktops to the fleet's
// other hosts, and takes theirs in (MoveTarget chooses where).
func (n *Node) Moves() *desktop.Moves { return n.moves }

// Reconcile, once recovery has run, writes this host's records of earlier
// generations again as the attached Manager holds each desktop now
// (Records.Reconcile): the others show them as they are again.
func (n *Node) Reconcile(ctx context.Context) error {
	written, dropped, err := n.Records.Reconcile(ctx, func(id string) (desktop.Desktop, bool) {
		d, err := n.m.Get(id)
		return d, err == nil
	})
	if err != nil {
		return err
	}
	if written > 0 {
		n.log.Info("reconciled the desktop records of this host's earlier generations", "records", written, "generation", n.generation)
	}
	if len(dropped) > 0 {
		n.log.Warn("deleted desktop records of this host that its recovery dropped", "desktops", dropped)
	}
	return nil
}

// PeerTLS is this host's side of the mutual TLS between the hosts' APIs:
// its peer listener serves with Server, its calls to other hosts use
// Client.
func (n *Node) PeerTLS() PeerTLS { return n.peerTLS }

// Join serves peers (hostd's API for the fleet's other hosts) on the
// peer port over mutual TLS, puts this host in the fleet's membership at
// the addresses it advertises (hostd listens on listen), and keeps its
// load there up to date while ctx lasts.
func (n *Node) Join(ctx context.Context, listen string, peers http.Handler) error {
	advertise, err := advertiseAddress(n.cfg.Advertise, listen, n.self.Address())
	if err != nil {
		return err
	}
	peerListen, err := n.servePeers(listen, peers)
	if err != nil {
		return err
	}
	peer, err := peerAddress(advertise, peerListen)
	if err != nil {
		return err
	}
	host := func() Host {
		h := n.describe()
		h.Name, h.Address, h.Peer, h.Generation = n.cfg.Host, advertise, peer, n.generation
		return h
	}
	m, err := Join(ctx, n.client, n.prefix, host(), n.cfg.Lease)
	if err != nil {
		return err
	}
	uctx, stop := context.WithCancel(ctx)
	n.mu.Lock()
	n.membership, n.stopUpdate = m, stop
	n.mu.Unlock()
	go n.keepJoined(uctx, m, host)
	return nil
}

// keepJoined refreshes this host's load a few times per lease (placement
// reads it), and joins again when the lease ran out (etcd was out of
// reach for longer than the lease): the others list the host again once
// it is back.
func (n *Node) keepJoined(ctx context.Context, m *Membership, host func() Host) {
	t := time.NewTicker(n.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Lost():
			n.log.Error("this host's lease in the fleet ran out (etcd out of reach for longer than --cluster-lease); joining again")
			if m = n.rejoin(ctx, host); m == nil {
				return
			}
		case <-t.C:
			if err := m.Update(ctx, host()); err != nil && ctx.Err() == nil {
				n.log.Warn("update this host in the fleet", "err", err)
			}
		}
	}
}

// rejoin joins the fleet again, trying once per lease until it can or
// ctx ends (nil then).
func (n *Node) rejoin(ctx context.Context, host func() Host) *Membership {
	for {
		m, err := Join(ctx, n.client, n.prefix, host(), n.cfg.Lease)
		if err == nil {
			n.mu.Lock()
			n.membership = m
			n.mu.Unlock()
			n.log.Info("this host is in the fleet again")
			return m
		}
		n.log.Warn("join the fleet again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(n.cfg.Lease):
		}
	}
}

// Close leaves the fleet and stops the member. A host that is killed
// instead leaves when its lease runs out.
func (n *Node) Close() error {
	n.mu.Lock()
	m, stop, stopWatch := n.membership, n.stopUpdate, n.stopWatch
	n.mu.Unlock()
	peersCtx, cancelPeers := context.WithTimeout(context.Background(), 5*time.Second)
	n.stopPeers(peersCtx)
	cancelPeers()
	if stopWatch != nil {
		stopWatch()
	}
	if m != nil {
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.Leave(ctx); err != nil {
			n.log.Warn("leave the fleet", "err", err)
		}
		cancel()
	}
	n.client.Close()
	if n.member != nil {
		n.member.Close()
	}
	return nil
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

// peerAddress is the peer API address other hosts are told: the host of
// the advertised API address, with the port the peer listener got.
func peerAddress(advertise, peerListen string) (string, error) {
	host, _, err := net.SplitHostPort(advertise)
	if err != nil {
		return "", fmt.Errorf("fleet: the advertised API address %q: %w", advertise, err)
	}
	_, port, err := net.SplitHostPort(peerListen)
	if err != nil {
		return "", fmt.Errorf("fleet: the address the peer API listens on: %w", err)
	}
	return net.JoinHostPort(host, port), nil
}
