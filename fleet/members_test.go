package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// Three TLS members become four: the running cluster is told of h4, h4
// starts joining it, and a write through h4 is read through h1; then h2 is
// taken out (as a dead member is, before its replacement) and the rest
// go on. Bad requests change nothing.
func TestMembersAreAddedAndRemoved(t *testing.T) {
	tc := startCluster(t, 3, true)
	c := tc.client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	addr := memberAddr(3)
	if err := AddHostCert(tc.certs, "test", CertHost{Name: "h4", Addrs: []string{addr, "127.0.0.1"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, addr, 2)
	h4 := Peer{Name: "h4", PeerURL: "https://" + net.JoinHostPort(addr, ports[0]), ClientURL: "https://" + net.JoinHostPort(addr, ports[1])}

	for _, bad := range []struct {
		name, url string
		want      error
	}{
		{"h4", "http://" + net.JoinHostPort(addr, ports[0]), desktop.ErrInvalid}, // the cluster has TLS
		{"h 4", h4.PeerURL, desktop.ErrInvalid},
		{"h1", h4.PeerURL, desktop.ErrConflict},
		{"h5", tc.peers[1].PeerURL, desktop.ErrConflict},
	} {
		if _, err := AddMember(ctx, c, bad.name, bad.url, true); !errors.Is(err, bad.want) {
			t.Errorf("add %s at %s: %v, want %v", bad.name, bad.url, err, bad.want)
		}
	}
	if ms, err := Members(ctx, c); err != nil || len(ms) != 3 {
		t.Fatalf("after bad adds: %+v, %v; want the 3 members", ms, err)
	}

	members, err := AddMember(ctx, c, "h4", h4.PeerURL, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 4 {
		t.Fatalf("members after the add: %+v", members)
	}
	if ms, _ := Members(ctx, c); !hasMember(ms, "", h4.PeerURL, false) {
		t.Errorf("members before h4 starts: %+v; want h4 listed unstarted by its peer URL", ms)
	}
	peers := append(append([]Peer(nil), tc.peers...), h4)
	m4, err := StartMember(ctx, MemberConfig{Cluster: "test", Name: "h4", Peers: peers, DataDir: filepath.Join(t.TempDir(), "h4"), TLS: HostTLS(tc.certs, "h4"), Join: true})
	if err != nil {
		t.Fatalf("h4 joining: %v", err)
	}
	defer m4.Close()
	c4, err := Connect(ctx, []string{h4.ClientURL}, HostTLS(tc.certs, "h4"))
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if _, err := c4.Put(ctx, "/wd-test-members/k", "through h4"); err != nil {
		t.Fatalf("write through h4: %v", err)
	}
	if got, err := c.Get(ctx, "/wd-test-members/k"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "through h4" {
		t.Fatalf("read through h1: %v, %v", got, err)
	}
	if ms, _ := Members(ctx, c); !hasMember(ms, "h4", h4.PeerURL, true) {
		t.Errorf("members once h4 runs: %+v", ms)
	}

	if err := RemoveMember(ctx, c, "h9"); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("remove a member that is not: %v, want not found", err)
	}
	tc.members[1].Close()
	tc.members[1] = nil
	if err := RemoveMember(ctx, c, "h2"); err != nil {
		t.Fatalf("remove h2, stopped: %v", err)
	}
	ms, err := Members(ctx, c)
	if err != nil || len(ms) != 3 || hasMember(ms, "h2", tc.peers[1].PeerURL, true) {
		t.Fatalf("members after h2 left: %+v, %v", ms, err)
	}
	if _, err := c.Put(ctx, "/wd-test-members/k", "after h2"); err != nil {
		t.Fatalf("write after h2 left: %v", err)
	}
}

func hasMember(ms []api.FleetMember, name, peerURL string, started bool) bool {
	for _, m := range ms {
		if m.Name == name && m.PeerURL == peerURL && m.Started == started {
			return true
		}
	}
	return false
}

// A member that joins may start with any number of peers; one that
// starts a cluster with 3 or 5.
func TestJoinTakesAnyNumberOfPeers(t *testing.T) {
	var peers []Peer
	for i := range 4 {
		peers = append(peers, Peer{Name: fmt.Sprintf("h%d", i+1), PeerURL: fmt.Sprintf("http://127.0.0.%d:2380", 41+i), ClientURL: fmt.Sprintf("http://127.0.0.%d:2379", 41+i)})
	}
	c := MemberConfig{Cluster: "test", Name: "h4", Peers: peers, DataDir: t.TempDir()}
	if _, err := etcdConfig(c); err == nil {
		t.Error("a new cluster of 4 was taken")
	}
	c.Join = true
	cfg, err := etcdConfig(c)
	if err != nil || cfg.ClusterState != "existing" {
		t.Errorf("a member joining with 4 peers: %v, state %v", err, cfg)
	}
}
