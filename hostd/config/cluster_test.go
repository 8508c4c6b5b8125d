package config

import (
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/fleet"
)

// Every fleet flag reaches the fleet's node: one dropped here would be
// ignored without a word.
func TestClusterNodeCarriesEveryFlag(t *testing.T) {
	c := Cluster{Name: "lab", Host: "h1", Peers: "h1=127.0.0.11", PeerPort: 1, ClientPort: 2, Certs: "certs", Lease: time.Second,
		Advertise: "127.0.0.21:8787", Endpoints: "https://e:2379", EtcdCA: "ca", EtcdCert: "cert", EtcdKey: "key"}
	want := fleet.NodeConfig{Cluster: "lab", Host: "h1", Peers: "h1=127.0.0.11", PeerPort: 1, ClientPort: 2, Certs: "certs", Lease: time.Second,
		Advertise: "127.0.0.21:8787", Endpoints: "https://e:2379", EtcdCA: "ca", EtcdCert: "cert", EtcdKey: "key",
		StateDir: "state", TokenFile: "state/token"}
	if got := c.Node("state", "state/token"); got != want {
		t.Errorf("Node = %+v, want %+v", got, want)
	}
}
