package fleet

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Peer is one member of the fleet's embedded etcd cluster: its name (the
// host's) and the URLs other members and clients reach it at.
type Peer struct {
	Name      string
	PeerURL   string
	ClientURL string
}

// MemberConfig is what one host needs to run its etcd member.
type MemberConfig struct {
	// Cluster names the fleet: members of another fleet refuse to join.
	Cluster string
	// Name is this host's name, one of Peers.
	Name string
	// Peers are every member of the cluster, this one included: three or
	// five (a majority survives the loss of one or two).
	Peers []Peer
	// DataDir holds the member's data; hostd keeps it in its state
	// directory.
	DataDir string
	// TLS, when set, is this member's certificate and the cluster's CA:
	// peers and clients must then present certificates the CA signed.
	TLS *TLSFiles
	// Join starts a member the running cluster was told of (AddMember):
	// Peers are then its members, this one among them, in any number.
	Join bool
}

// TLSFiles are the PEM files of one host (from `hostd cluster certs`).
type TLSFiles struct {
	CA, Cert, Key string
}

// etcdConfig builds the embedded member's configuration: a pure function
// of c, checked before anything starts.
func etcdConfig(c MemberConfig) (*embed.Config, error) {
	if c.Cluster == "" {
		return nil, fmt.Errorf("fleet: the cluster needs a name (--cluster-name)")
	}
	if n := len(c.Peers); !c.Join && n != 1 && n != 3 && n != 5 {
		return nil, fmt.Errorf("fleet: %d peers: a fleet's etcd starts with 3 or 5 members (1 only for tests), so that a majority outlives the loss of one or two; a member added later joins with --cluster-join", n)
	}
	var self *Peer
	var initial []string
	seen := map[string]bool{}
	for i, p := range c.Peers {
		if p.Name == "" || strings.ContainsAny(p.Name, "=,/ ") {
			return nil, fmt.Errorf("fleet: peer %d: name %q: use letters, digits, '-' and '.'", i, p.Name)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("fleet: peer name %q appears twice", p.Name)
		}
		seen[p.Name] = true
		for _, u := range []string{p.PeerURL, p.ClientURL} {
			if _, err := parseMemberURL(u, c.TLS != nil); err != nil {
				return nil, fmt.Errorf("fleet: peer %s: %w", p.Name, err)
			}
		}
		if p.Name == c.Name {
			self = &c.Peers[i]
		}
		initial = append(initial, p.Name+"="+p.PeerURL)
	}
	if self == nil {
		return nil, fmt.Errorf("fleet: this host's name %q is not among the peers", c.Name)
	}
	if c.DataDir == "" {
		return nil, fmt.Errorf("fleet: the member needs a data directory")
	}
	peerURL, _ := parseMemberURL(self.PeerURL, c.TLS != nil)
	clientURL, _ := parseMemberURL(self.ClientURL, c.TLS != nil)

	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.DataDir
	cfg.InitialClusterToken = c.Cluster
	cfg.InitialCluster = strings.Join(initial, ",")
	cfg.ClusterState = embed.ClusterStateFlagNew
	if c.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
	// The history is compacted: every host rewrites its key a few times
	// per lease, and an uncompacted history fills etcd's quota.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "10m"
	// No metrics listener of etcd's own: hostd serves its metrics.
	cfg.ListenMetricsUrls = nil
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(c.DataDir, "etcd.log")}
	if c.TLS != nil {
		info := transport.TLSInfo{CertFile: c.TLS.Cert, KeyFile: c.TLS.Key, TrustedCAFile: c.TLS.CA, ClientCertAuth: true}
		cfg.PeerTLSInfo, cfg.ClientTLSInfo = info, info
	}
	return cfg, nil
}

// parseMemberURL checks one of a member's URLs: http or https (https
// exactly when the cluster has TLS), a host and a port, nothing else.
func parseMemberURL(raw string, tls bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", raw, err)
	}
	want := "http"
	if tls {
		want = "https"
	}
	if u.Scheme != want {
		return nil, fmt.Errorf("url %q: want %s:// (the cluster %s TLS)", raw, want, map[bool]string{true: "has", false: "has no"}[tls])
	}
	if u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("url %q: want %s://HOST:PORT", raw, want)
	}
	return u, nil
}

// Member is this host's running etcd member.
type Member struct {
	etcd *embed.Etcd
	cfg  MemberConfig
}

// StartMember starts this host's etcd member and waits, until ctx ends,
// for it to join its cluster (which needs a majority of the peers up).
func StartMember(ctx context.Context, c MemberConfig) (*Member, error) {
	cfg, err := etcdConfig(c)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, "member")); err == nil {
		// A member that has run before rejoins with its own data.
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("fleet: start etcd member %s: %w", c.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return &Member{etcd: e, cfg: c}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("fleet: etcd member %s: %w", c.Name, err)
	case <-ctx.Done():
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("fleet: etcd member %s did not join its cluster (are a majority of %d peers up?): %w", c.Name, len(c.Peers), ctx.Err())
	}
}

// Endpoints are the client URLs of every member, for a client that should
// outlive the loss of any one.
func (m *Member) Endpoints() []string {
	var out []string
	for _, p := range m.cfg.Peers {
		out = append(out, p.ClientURL)
	}
	return out
}

// IsLeader says whether this member leads its cluster now.
func (m *Member) IsLeader() bool {
	return m.etcd.Server.Leader() == m.etcd.Server.MemberID()
}

// Close stops the member; the others carry on while a majority is up.
func (m *Member) Close() { m.etcd.Close() }
