package fleet

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// Locate finds the peer API address of the host that runs a desktop; ok is
// false when it runs here, or nowhere in the fleet.
func (n *Node) Locate(ctx context.Context, id string) (string, bool, error) {
	host, addr, ok, err := Locate(ctx, n.client, n.prefix, id)
	if err != nil || !ok || host == n.cfg.Host {
		return "", false, err
	}
	return addr, true, nil
}

// Place chooses the host for a new desktop of snapshot and holds its room
// there until release.
func (n *Node) Place(ctx context.Context, snapshot string) (string, bool, func(), error) {
	p, err := Place(ctx, n.client, n.prefix, snapshot, desktop.NewID("p-"))
	if err != nil {
		return "", false, nil, err
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Release(ctx); err != nil {
			n.log.Warn("release a placement (its lease will)", "err", err)
		}
	}
	here := p.Host.Name == n.cfg.Host
	if here {
		return "", true, release, nil
	}
	addr, err := p.Host.peerAddress()
	if err != nil {
		release()
		return "", false, nil, err
	}
	return addr, false, release, nil
}

// Others lists the desktops the fleet's other hosts run.
func (n *Node) Others(ctx context.Context) ([]FleetDesktop, error) {
	all, err := Desktops(ctx, n.client, n.prefix)
	if err != nil {
		return nil, err
	}
	var out []FleetDesktop
	for _, d := range all {
		if d.Host != n.cfg.Host {
			out = append(out, d)
		}
	}
	return out, nil
}

// Peers lists the peer API addresses (mutual TLS) of the fleet's other
// live hosts.
func (n *Node) Peers(ctx context.Context) ([]string, error) {
	hosts, err := Hosts(ctx, n.client, n.prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hosts {
		if h.Name != n.cfg.Host && h.Peer != "" {
			out = append(out, h.Peer)
		}
	}
	return out, nil
}

// Drain stops (or restarts) placing new desktops on a host.
func (n *Node) Drain(ctx context.Context, host string, on bool) error {
	return Drain(ctx, n.client, n.prefix, host, on)
}

// Status lists the fleet's live hosts.
func (n *Node) Status(ctx context.Context) (api.Fleet, error) {
	hosts, err := Hosts(ctx, n.client, n.prefix)
	if err != nil {
		return api.Fleet{}, err
	}
	out := api.Fleet{Name: n.cfg.Cluster, Self: n.cfg.Host, Hosts: []api.FleetHost{}}
	if leader, err := Leader(ctx, n.client, n.self.ClientURL); err == nil {
		out.Leader = leader
	} else {
		n.log.Warn("etcd's leader unknown", "err", err)
	}
	for _, h := range hosts {
		fh := api.FleetHost{
			Name: h.Name, Address: h.Address, Peer: h.Peer, Generation: h.Generation, MemoryMiB: h.MemoryMiB, MaxDesktops: h.MaxDesktops,
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

// describe is what this host says of itself in the fleet: its caps, its
// load, what it restores, which snapshots it holds and how many machines
// of each its warm pool holds ready.
func (n *Node) describe() Host {
	m, lim := n.m, n.limits
	shape := m.Lineage().Shape()
	h := Host{
		MemoryMiB: lim.MaxMemoryMiB, MaxDesktops: lim.MaxDesktops,
		Restore: RestoreKey{QEMU: shape.QEMUVersion + "/" + shortSum(shape.QEMUSHA256), Machine: shape.Type, Accel: shape.Accel},
	}
	h.Desktops, h.UsedMemoryMiB = desktop.Holding(m.List())
	if snaps, _, err := m.Lineage().Catalog().List(); err == nil {
		for _, s := range snaps {
			held := HeldSnapshot{Name: s.Name, MemoryMiB: s.Manifest.Machine.MemoryMiB}
			held.Warm, _ = m.Lineage().PoolSize(s.Name)
			h.Snapshots = append(h.Snapshots, held)
		}
		slices.SortFunc(h.Snapshots, func(a, b HeldSnapshot) int { return strings.Compare(a.Name, b.Name) })
	}
	return h
}

func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
