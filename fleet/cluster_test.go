package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

// Every member and client of these tests is on this machine's loopback:
// member i listens on memberAddr(i), as a distinct host would. The block
// is this package's own: hostd/fleete2e, which runs beside it, has its
// members on 127.0.0.11 to .13 and the bench's fleet suite on .31 up.
func memberAddr(i int) string { return fmt.Sprintf("127.0.0.%d", 41+i) }

// freePorts finds n ports free on addr now, distinct: each is held until
// all are found (the member binds them a moment later). One at a time, a
// port given back could come again for the next: a member's peer and
// client URLs on one port failed to start with "address already in use".
func freePorts(t *testing.T, addr string, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			t.Fatalf("listen on %s (a loopback address of this machine): %v", addr, err)
		}
		defer ln.Close()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ports = append(ports, port)
	}
	return ports
}

// testCluster is n members started side by side.
type testCluster struct {
	members []*Member
	peers   []Peer
	certs   string // "" without TLS
}

// startCluster starts n members (TLS when withTLS) and waits for all to
// join.
func startCluster(t *testing.T, n int, withTLS bool) *testCluster {
	t.Helper()
	scheme := "http"
	tc := &testCluster{}
	if withTLS {
		scheme = "https"
		tc.certs = filepath.Join(t.TempDir(), "certs")
		var hosts []CertHost
		for i := range n {
			// etcd checks a peer's certificate against the address the
			// peer called from, and on the loopback every member calls
			// from 127.0.0.1 (on a network, from its own address).
			hosts = append(hosts, CertHost{Name: fmt.Sprintf("h%d", i+1), Addrs: []string{memberAddr(i), "127.0.0.1"}})
		}
		if err := WriteCerts(tc.certs, "test", hosts, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		addr := memberAddr(i)
		ports := freePorts(t, addr, 2)
		tc.peers = append(tc.peers, Peer{
			Name:      fmt.Sprintf("h%d", i+1),
			PeerURL:   scheme + "://" + net.JoinHostPort(addr, ports[0]),
			ClientURL: scheme + "://" + net.JoinHostPort(addr, ports[1]),
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	tc.members = make([]*Member, n)
	dir := t.TempDir()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := MemberConfig{Cluster: "test", Name: tc.peers[i].Name, Peers: tc.peers, DataDir: filepath.Join(dir, tc.peers[i].Name)}
			if withTLS {
				cfg.TLS = HostTLS(tc.certs, tc.peers[i].Name)
			}
			tc.members[i], errs[i] = StartMember(ctx, cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			logs, _ := os.ReadFile(filepath.Join(dir, tc.peers[i].Name, "etcd.log"))
			t.Fatalf("member %d: %v\nits log:\n%s", i, err, logs)
		}
	}
	t.Cleanup(func() {
		for _, m := range tc.members {
			if m != nil {
				m.Close()
			}
		}
	})
	return tc
}

// client connects to every member, as host i would.
func (tc *testCluster) client(t *testing.T, i int) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var files *TLSFiles
	if tc.certs != "" {
		files = HostTLS(tc.certs, tc.peers[i].Name)
	}
	c, err := Connect(ctx, tc.members[0].Endpoints(), files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The leader of three TLS members stops hard: the cluster elects another and
// a client given every member's address goes on writing within 10 s.
func TestThreeMembersOutliveTheirLeader(t *testing.T) {
	tc := startCluster(t, 3, true)
	c := tc.client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Put(ctx, "/wd/test/before", "1"); err != nil {
		t.Fatal(err)
	}
	leader := -1
	for i, m := range tc.members {
		if m.IsLeader() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member leads")
	}
	// Stopped hard, as a crash would: no leadership handed over.
	tc.members[leader].etcd.Server.HardStop()
	tc.members[leader].Close()
	tc.members[leader] = nil
	stopped := time.Now()
	// A host's record write, as hostd makes it (retried within 10 s).
	if err := NewRecords(c, "h1", "/wd/test/").PutDesktop(desktop.Desktop{ID: "d-after", State: desktop.StateRunning}); err != nil {
		t.Fatalf("no record written within 10 s of the leader's stop: %v", err)
	}
	t.Logf("a record write answered %s after the leader (member %d) stopped", time.Since(stopped).Round(time.Millisecond), leader+1)
	got, err := c.Get(ctx, "/wd/test/", clientv3.WithPrefix())
	if err != nil || len(got.Kvs) != 2 {
		t.Fatalf("after the leader's loss: %v, %v; want both keys", got, err)
	}
}

// A client whose certificate another CA signed is refused.
func TestStrangersAreRefused(t *testing.T) {
	tc := startCluster(t, 1, true)
	other := filepath.Join(t.TempDir(), "other")
	if err := WriteCerts(other, "other", []CertHost{{Name: "h1", Addrs: []string{memberAddr(0)}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := Connect(ctx, tc.members[0].Endpoints(), HostTLS(other, "h1")); err == nil {
		c.Close()
		t.Fatal("a client of another fleet's CA was let in")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	if c, err := Connect(ctx2, tc.members[0].Endpoints(), nil); err == nil {
		c.Close()
		t.Fatal("a client without TLS was let in")
	}
}

// A host's key is there while it keeps its lease, and goes by itself
// within the lease's TTL once the host stops without leaving.
func TestAHostThatStopsLeavesWithinItsLease(t *testing.T) {
	tc := startCluster(t, 1, false)
	observer := tc.client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	for _, name := range []string{"a", "b"} {
		c := tc.client(t, 0)
		m, err := Join(ctx, c, "", Host{Name: name, Address: "127.0.0.21:8080", MemoryMiB: 4096}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if name == "b" {
			// b dies: its client goes without revoking the lease.
			watch := observer.Watch(ctx, hostKey(DefaultPrefix, "b"))
			hs, err := Hosts(ctx, observer, "")
			if err != nil || len(hs) != 2 {
				t.Fatalf("hosts %+v, %v; want a and b", hs, err)
			}
			c.Close()
			died := time.Now()
			deadline := time.After(ttl + 5*time.Second)
			for gone := false; !gone; {
				select {
				case resp := <-watch:
					for _, ev := range resp.Events {
						gone = gone || ev.Type == clientv3.EventTypeDelete
					}
				case <-deadline:
					t.Fatal("b's key outlived its lease by 5 s")
				}
			}
			t.Logf("b's key went %s after b stopped (lease %s)", time.Since(died).Round(time.Millisecond), ttl)
		} else {
			defer m.Leave(context.WithoutCancel(ctx))
		}
	}
	hs, err := Hosts(ctx, observer, "")
	if err != nil || len(hs) != 1 || hs[0].Name != "a" {
		t.Fatalf("hosts %+v, %v; want a alone", hs, err)
	}
}

// placed counts the test prefixes handed out, one fresh place each.
var placed atomic.Int64

func freshPrefix() string { return fmt.Sprintf("/wd-test-%d/", placed.Add(1)) }

// A second host under a live host's name is refused; the same host
// rejoining (its address unchanged, as after a restart) is not.
func TestAHostNameIsClaimedOnce(t *testing.T) {
	tc := startCluster(t, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := freshPrefix()
	c := tc.client(t, 0)
	if _, err := Join(ctx, c, prefix, Host{Name: "a", Address: "127.0.0.21:8787"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Join(ctx, c, prefix, Host{Name: "a", Address: "127.0.0.22:8787"}, 10*time.Second); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("a second host named a: %v, want ErrNameTaken", err)
	}
	if _, err := Join(ctx, c, prefix, Host{Name: "a", Address: "127.0.0.21:8787"}, 10*time.Second); err != nil {
		t.Fatalf("host a rejoining from its own address: %v", err)
	}
}
