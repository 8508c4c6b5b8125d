package fleet

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEtcdConfigChecksItsInput(t *testing.T) {
	three := []Peer{
		{Name: "a", PeerURL: "http://127.0.0.11:2380", ClientURL: "http://127.0.0.11:2379"},
		{Name: "b", PeerURL: "http://127.0.0.12:2380", ClientURL: "http://127.0.0.12:2379"},
		{Name: "c", PeerURL: "http://127.0.0.13:2380", ClientURL: "http://127.0.0.13:2379"},
	}
	good := MemberConfig{Cluster: "f", Name: "b", Peers: three, DataDir: "/state/etcd"}
	cfg, err := etcdConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "b" || cfg.InitialClusterToken != "f" || cfg.ListenPeerUrls[0].Host != "127.0.0.12:2380" || cfg.ListenClientUrls[0].Host != "127.0.0.12:2379" {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.InitialCluster != "a=http://127.0.0.11:2380,b=http://127.0.0.12:2380,c=http://127.0.0.13:2380" {
		t.Fatalf("initial cluster %q", cfg.InitialCluster)
	}
	if len(cfg.ListenMetricsUrls) != 0 {
		t.Fatalf("etcd would listen for metrics on %v", cfg.ListenMetricsUrls)
	}
	for name, tt := range map[string]struct {
		mutate func(*MemberConfig)
		want   string
	}{
		"no cluster": {func(c *MemberConfig) { c.Cluster = "" }, "needs a name"},
		"two peers":  {func(c *MemberConfig) { c.Peers = c.Peers[:2] }, "3 or 5 members"},
		"not a peer": {func(c *MemberConfig) { c.Name = "z" }, "not among the peers"},
		"twice":      {func(c *MemberConfig) { c.Peers = []Peer{three[0], three[0], three[2]} }, "appears twice"},
		"bad name": {func(c *MemberConfig) {
			c.Peers = []Peer{three[0], {Name: "x=y", PeerURL: three[1].PeerURL, ClientURL: three[1].ClientURL}, three[2]}
		}, "name"},
		"https sans tls": {func(c *MemberConfig) {
			c.Peers = []Peer{three[0], {Name: "b", PeerURL: "https://127.0.0.12:2380", ClientURL: three[1].ClientURL}, three[2]}
		}, "want http://"},
		"http with tls": {func(c *MemberConfig) { c.TLS = &TLSFiles{} }, "want https://"},
		"no port": {func(c *MemberConfig) {
			c.Peers = []Peer{three[0], {Name: "b", PeerURL: "http://127.0.0.12", ClientURL: three[1].ClientURL}, three[2]}
		}, "HOST:PORT"},
		"no data dir": {func(c *MemberConfig) { c.DataDir = "" }, "data directory"},
	} {
		c := good
		c.Peers = append([]Peer(nil), good.Peers...)
		tt.mutate(&c)
		if _, err := etcdConfig(c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tt.want)
		}
	}
}

func TestWriteCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	now := time.Now()
	hosts := []CertHost{{Name: "h1", Addrs: []string{"127.0.0.11", "h1.example"}}, {Name: "h2", Addrs: []string{"127.0.0.12"}}}
	if err := WriteCerts(dir, "f", hosts, now); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.pem: %v", err)
	}
	for _, h := range hosts {
		b, err := os.ReadFile(filepath.Join(dir, h.Name+".pem"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now}); err != nil {
				t.Errorf("%s for %v: %v", h.Name, usage, err)
			}
		}
		if !cert.IPAddresses[0].Equal(net.ParseIP(h.Addrs[0])) {
			t.Errorf("%s's certificate names %v", h.Name, cert.IPAddresses)
		}
		if fi, err := os.Stat(filepath.Join(dir, h.Name+"-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's key: %v, %v", h.Name, fi, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA's key, for hosts added later: %v, %v", fi, err)
	}
	// A host added later gets a certificate the same CA signed.
	if err := AddHostCert(dir, "f", CertHost{Name: "h3", Addrs: []string{"127.0.0.13"}}, now); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "h3.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	added, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := added.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		t.Errorf("the added host's certificate: %v", err)
	}
	if err := AddHostCert(dir, "f", CertHost{Name: "h3", Addrs: []string{"127.0.0.13"}}, now); err == nil {
		t.Error("a second certificate for h3 was written")
	}
	if err := AddHostCert(t.TempDir(), "f", CertHost{Name: "h4", Addrs: []string{"127.0.0.14"}}, now); err == nil {
		t.Error("a host was added without a CA")
	}
	if err := WriteCerts(dir, "f", hosts, now); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Errorf("a second WriteCerts into the same dir: %v", err)
	}
	for name, hs := range map[string][]CertHost{
		"no hosts":   nil,
		"no address": {{Name: "h1"}},
		"twice":      {{Name: "h1", Addrs: []string{"127.0.0.11"}}, {Name: "h1", Addrs: []string{"127.0.0.12"}}},
		"path name":  {{Name: "../h1", Addrs: []string{"127.0.0.11"}}},
	} {
		d := filepath.Join(t.TempDir(), "c")
		if err := WriteCerts(d, "f", hs, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s: left %s behind", name, d)
		}
	}
}

func TestParsePeers(t *testing.T) {
	ps, err := ParsePeers("h1=127.0.0.11, h2=127.0.0.12,h3=::1", 2380, 2379, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0] != (Peer{Name: "h1", PeerURL: "https://127.0.0.11:2380", ClientURL: "https://127.0.0.11:2379"}) || ps[2].PeerURL != "https://[::1]:2380" {
		t.Fatalf("peers %+v", ps)
	}
	if ps[2].Address() != "::1" || ps[0].Address() != "127.0.0.11" {
		t.Fatalf("addresses %q %q", ps[0].Address(), ps[2].Address())
	}
	for _, bad := range []struct {
		raw        string
		peer, cli  int
		wantSubstr string
	}{
		{"", 2380, 2379, "empty"},
		{"h1", 2380, 2379, "NAME=ADDRESS"},
		{"h1=127.0.0.11:2380", 2380, 2379, "no port"},
		{"=127.0.0.11", 2380, 2379, "NAME=ADDRESS"},
		{"h1=127.0.0.11", 2380, 2380, "two ports"},
		{"h1=127.0.0.11", 0, 2379, "1 to 65535"},
	} {
		if _, err := ParsePeers(bad.raw, bad.peer, bad.cli, false); err == nil || !strings.Contains(err.Error(), bad.wantSubstr) {
			t.Errorf("%q: %v, want an error saying %q", bad.raw, err, bad.wantSubstr)
		}
	}
}

// Whatever --cluster-peers says, ParsePeers does not panic, and what it
// accepts are URLs the member's configuration accepts too.
func FuzzParsePeers(f *testing.F) {
	f.Add("h1=127.0.0.11,h2=127.0.0.12,h3=127.0.0.13")
	f.Add("a=::1")
	f.Add("x=y=z,,")
	f.Fuzz(func(t *testing.T, raw string) {
		ps, err := ParsePeers(raw, 2380, 2379, true)
		if err != nil {
			return
		}
		for _, p := range ps {
			for _, u := range []string{p.PeerURL, p.ClientURL} {
				if _, err := parseMemberURL(u, true); err != nil {
					t.Fatalf("accepted %q, whose URL %q the member refuses: %v", raw, u, err)
				}
			}
		}
	})
}
