package fleet

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// pullEventEvery spaces a pull's progress events: a pull of a GiB would
// otherwise tell every 32 KiB.
const pullEventEvery = 250 * time.Millisecond

// tellPull publishes an event of a pull.
func (n *Node) tellPull(typ string, p api.SnapshotPull, summary string) {
	n.pulls.Publish(api.Event{Type: typ, Pull: &p, Host: n.cfg.Host, Time: time.Now().UTC(), Summary: summary})
}

// pullProgress returns the Progress of a pull from host from: an event
// at its start, then at most one per pullEventEvery, and at its end.
func (n *Node) pullProgress(from string) func(PullProgress) {
	var last time.Time
	return func(p PullProgress) {
		if now := time.Now(); p.Done == 0 || p.Done == p.Total || now.Sub(last) >= pullEventEvery {
			last = now
			n.tellPull(api.EventPulling, api.SnapshotPull{Snapshot: p.Snapshot, From: from, File: p.File, Bytes: p.Done, Total: p.Total}, "")
		}
	}
}

// PullEvents subscribes to this host's pull events.
func (n *Node) PullEvents() (<-chan api.Event, func()) { return n.pulls.Subscribe() }

// EnsureSnapshot makes sure this host holds snapshot name before a create:
// when it does not, it pulls the files from a host that holds it, and the
// snapshots it is layered on first (one pull at a time per host; later
// creates wait for it, and then find it).
func (n *Node) EnsureSnapshot(ctx context.Context, name string) error {
	cat := n.m.Lineage().Catalog()
	if _, err := cat.Get(name); err == nil {
		return nil
	}
	n.pullMu.Lock()
	defer n.pullMu.Unlock()
	shape := n.m.Lineage().Shape()
	shape.Devices = nil // the devices are the snapshot's own
	return n.pull(ctx, cat, shape, name, 0)
}

// maxLayers bounds a chain of layered snapshots pulled for one create.
const maxLayers = 16

// pull pulls name (with n.pullMu held) unless it is here already.
func (n *Node) pull(ctx context.Context, cat *desktop.Catalog, shape desktop.MachineShape, name string, depth int) error {
	if _, err := cat.Get(name); err == nil {
		return nil // pulled while this one waited, or a parent already here
	}
	if depth > maxLayers {
		return fmt.Errorf("%w: snapshot %s is layered more than %d deep", desktop.ErrInvalid, name, maxLayers)
	}
	hosts, err := Hosts(ctx, n.client, n.prefix)
	if err != nil {
		return err
	}
	var from *Host
	for i, h := range hosts {
		if _, ok := h.Holds(name); ok && h.Name != n.cfg.Host {
			from = &hosts[i]
			break
		}
	}
	if from == nil {
		return nil // no host has it: the create says so
	}
	p := Puller{
		HTTP:  &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: n.peerTLS.Client}},
		Token: n.Token(),
		Accept: func(m *desktop.Manifest) error {
			if diffs := m.Machine.Mismatch(shape); len(diffs) > 0 {
				return fmt.Errorf("%w: it does not restore on this host: %s", desktop.ErrMismatch, strings.Join(diffs, "; "))
			}
			// Its disk layers on its image's, by the image's place in
			// the cache: the image moves by being built, not pulled.
			if m.Image.Hash != "" && !n.hasImage(m.Image.Hash) {
				return fmt.Errorf("%w: its disk layers on image %s (%s, flavor %s), which this host has not built: build it here (hostd image build --flavor %s) or create on a host that has it", desktop.ErrMismatch, m.Image.Name, m.Image.Hash[:min(12, len(m.Image.Hash))], m.Image.Flavor, m.Image.Flavor)
			}
			return nil
		},
		EnsureParent: func(ctx context.Context, parent string) error {
			return n.pull(ctx, cat, shape, parent, depth+1)
		},
		Progress: n.pullProgress(from.Name),
	}
	n.log.Info("pulling a snapshot from another host of the fleet", "snapshot", name, "from", from.Name)
	addr, err := from.peerAddress()
	if err != nil {
		return err
	}
	s, stats, err := p.Pull(ctx, "https://"+addr, name, cat)
	if err != nil {
		n.tellPull(api.EventPullFailed, api.SnapshotPull{Snapshot: name, From: from.Name, Bytes: stats.Bytes}, err.Error())
		return err
	}
	n.tellPull(api.EventPulled, api.SnapshotPull{Snapshot: name, From: from.Name, Bytes: stats.Bytes, Total: stats.Bytes},
		fmt.Sprintf("%d MiB in %s", stats.Bytes>>20, stats.Duration.Round(time.Millisecond)))
	n.log.Info("pulled a snapshot", "snapshot", s.Name, "from", from.Name, "bytes", stats.Bytes, "took", stats.Duration, "resumed", stats.Resumed,
		"mib_per_s", float64(stats.Bytes)/(1<<20)/stats.Duration.Seconds())
	return nil
}
