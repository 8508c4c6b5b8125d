package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

// Host is what a hostd says of itself in the fleet: where to reach it,
// how much it may still take, what it can restore and what it holds.
type Host struct {
	Name    string `json:"name"`
	Address string `json:"address"` // hostd's API, host:port
	// Peer is where the other hosts reach its API: host:port, mutual TLS
	// with the fleet's certificates (LoadPeerTLS).
	Peer string `json:"peer,omitempty"`
	// Generation counts this host's starts (StartGeneration).
	Generation uint64 `json:"generation,omitempty"`
	// Capacity and load.
	MemoryMiB     int `json:"memory_mib"` // --max-memory-mib
	MaxDesktops   int `json:"max_desktops"`
	UsedMemoryMiB int `json:"used_memory_mib"`
	Desktops      int `json:"desktops"`
	// Restore is what a snapshot must have been made with to restore here.
	Restore RestoreKey `json:"restore"`
	// Snapshots are the snapshots whose files this host holds.
	Snapshots []HeldSnapshot `json:"snapshots,omitempty"`
	// Draining is set by Hosts when the host takes no new desktops (Drain);
	// it is not part of what the host says of itself.
	Draining bool `json:"-"`
}

// HeldSnapshot is a snapshot a host holds, the guest memory a desktop
// made from it takes, and how many machines of it the host's warm pool
// holds ready (as of the host's last refresh).
type HeldSnapshot struct {
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	Warm      int    `json:"warm,omitempty"`
}

// Holds returns the snapshot of that name the host holds.
func (h Host) Holds(name string) (HeldSnapshot, bool) {
	for _, s := range h.Snapshots {
		if s.Name == name {
			return s, true
		}
	}
	return HeldSnapshot{}, false
}

// RestoreKey is what a memory snapshot depends on beyond its files: it
// restores only on a host with the same QEMU build, machine type and
// accelerator.
type RestoreKey struct {
	QEMU    string `json:"qemu"`
	Machine string `json:"machine"`
	Accel   string `json:"accel"`
}

// Membership is this host's leased key in the fleet: it is there while
// the host keeps its lease alive, and goes by itself TTL after the host
// stops (killed, or cut off from etcd).
type Membership struct {
	c     *clientv3.Client
	key   string
	lease clientv3.LeaseID
	stop  context.CancelFunc
	lost  chan struct{}
}

func hostKey(prefix, name string) string { return prefix + "hosts/" + name }

// Join puts h under its leased key, with a lease of ttl (whole seconds, at
// least 2), and keeps the lease alive until Leave or until ctx ends. Lost
// is closed if the lease runs out first.
func Join(ctx context.Context, c *clientv3.Client, prefix string, h Host, ttl time.Duration) (*Membership, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if ttl < 2*time.Second {
		return nil, fmt.Errorf("fleet: a host's lease of %s is too short: at least 2s", ttl)
	}
	grant, err := c.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, unreachable("join", err)
	}
	m := &Membership{c: c, key: hostKey(prefix, h.Name), lease: grant.ID, lost: make(chan struct{})}
	if err := m.claim(ctx, h); err != nil {
		c.Revoke(context.WithoutCancel(ctx), grant.ID)
		return nil, err
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	alive, err := c.KeepAlive(kctx, grant.ID)
	if err != nil {
		stop()
		c.Revoke(context.WithoutCancel(ctx), grant.ID)
		return nil, unreachable("join", err)
	}
	go func() {
		for range alive {
		}
		// The channel closes when the lease is gone or the keep-alive was
		// stopped.
		if kctx.Err() == nil {
			close(m.lost)
		}
	}()
	context.AfterFunc(ctx, stop)
	return m, nil
}

// ErrNameTaken is a join under a name a live host at another address
// holds: two hosts of one name would load each other's records.
var ErrNameTaken = errors.New("another live host of the fleet has this name")

// claim puts h under its key if no host holds the name, or if the host
// that holds it is this one (the same address: a restart before its old
// lease ran out), in one transaction.
func (m *Membership) claim(ctx context.Context, h Host) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	for {
		get, err := m.c.Get(ctx, m.key)
		if err != nil {
			return unreachable("join", err)
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(m.key), "=", 0)
		if len(get.Kvs) == 1 {
			old, err := decodeHost(get.Kvs[0].Value)
			if err == nil && old.Address != h.Address {
				return fmt.Errorf("fleet: %w: %s at %s; give this host another --cluster-host, or stop that one", ErrNameTaken, h.Name, old.Address)
			}
			cmp = clientv3.Compare(clientv3.ModRevision(m.key), "=", get.Kvs[0].ModRevision)
		}
		txn, err := m.c.Txn(ctx).If(cmp).Then(clientv3.OpPut(m.key, string(b), clientv3.WithLease(m.lease))).Commit()
		if err != nil {
			return unreachable("join", err)
		}
		if txn.Succeeded {
			return nil
		}
	}
}

// Update writes h again under the same lease (its load changed).
func (m *Membership) Update(ctx context.Context, h Host) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := m.c.Put(ctx, m.key, string(b), clientv3.WithLease(m.lease)); err != nil {
		return unreachable("update host", err)
	}
	return nil
}

// Lost is closed when the lease ran out while the host still wanted it.
func (m *Membership) Lost() <-chan struct{} { return m.lost }

// Leave takes the host out of the fleet at once.
func (m *Membership) Leave(ctx context.Context) error {
	m.stop()
	if _, err := m.c.Revoke(ctx, m.lease); err != nil {
		return unreachable("leave", err)
	}
	return nil
}

// Hosts lists the hosts whose lease is alive, each marked Draining when
// it takes no new desktops.
func Hosts(ctx context.Context, c *clientv3.Client, prefix string) ([]Host, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(prefix+"hosts/", clientv3.WithPrefix()),
		clientv3.OpGet(prefix+drainingKey, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, unreachable("list hosts", err)
	}
	draining := map[string]bool{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		draining[strings.TrimPrefix(string(kv.Key), prefix+drainingKey)] = true
	}
	var out []Host
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		h, err := decodeHost(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		h.Draining = draining[h.Name]
		out = append(out, h)
	}
	return out, nil
}

// drainingKey holds, under a fleet's prefix, a key per draining host.
const drainingKey = "draining/"

// Drain stops (on) or restarts (off) placing new desktops on host; its
// desktops run on until they are deleted. It outlives the host's lease:
// a drained host that restarts stays drained.
func Drain(ctx context.Context, c *clientv3.Client, prefix, host string, on bool) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if host == "" || strings.Contains(host, "/") {
		return fmt.Errorf("%w: host name %q", desktop.ErrInvalid, host)
	}
	var err error
	if on {
		_, err = c.Put(ctx, prefix+drainingKey+host, "")
	} else {
		_, err = c.Delete(ctx, prefix+drainingKey+host)
	}
	if err != nil {
		return unreachable("drain "+host, err)
	}
	return nil
}

func decodeHost(b []byte) (Host, error) {
	var h Host
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("host record: %w", err)
	}
	return h, nil
}

// Leader names the member that leads the fleet's etcd now, as the member
// at endpoint sees it.
func Leader(ctx context.Context, c *clientv3.Client, endpoint string) (string, error) {
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		return "", unreachable("etcd status", err)
	}
	ms, err := c.MemberList(ctx)
	if err != nil {
		return "", unreachable("etcd members", err)
	}
	for _, m := range ms.Members {
		if m.ID == st.Leader {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("fleet: etcd's leader %x is not among its members", st.Leader)
}

// peerAddress is where the other hosts reach h's API, or an error saying
// that h serves none.
func (h Host) peerAddress() (string, error) {
	if h.Peer == "" {
		return "", fmt.Errorf("%w: host %s serves no API for the fleet's hosts (a hostd from before TLS between hosts: upgrade it)", desktop.ErrUnavailable, h.Name)
	}
	return h.Peer, nil
}
