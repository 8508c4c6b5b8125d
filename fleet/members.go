package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// Growing and shrinking the fleet's embedded etcd (docs/FLEET.md): a
// member is added by telling the running cluster of it first (AddMember),
// then starting its host with --cluster-join; one is removed by taking it
// out (RemoveMember), which a member that is dead needs before its
// replacement is added. etcd refuses either when the members it can reach
// could not agree after it.

// Members lists the fleet's etcd members.
func (n *Node) Members(ctx context.Context) ([]api.FleetMember, error) { return Members(ctx, n.client) }

// AddMember tells the fleet's embedded etcd of host name, whose member
// will listen at address on the fleet's peer port, to be started next
// with --cluster-join.
func (n *Node) AddMember(ctx context.Context, name, address string) ([]api.FleetMember, error) {
	if err := n.embedded(); err != nil {
		return nil, err
	}
	if address == "" || strings.Contains(address, ":") && net.ParseIP(address) == nil {
		return nil, fmt.Errorf("%w: member %s: address %q: give the host's address alone (its member listens on the fleet's --cluster-peer-port, %d)", desktop.ErrInvalid, name, address, n.cfg.PeerPort)
	}
	return AddMember(ctx, n.client, name, "https://"+net.JoinHostPort(address, strconv.Itoa(n.cfg.PeerPort)), true)
}

// RemoveMember takes member name out of the fleet's embedded etcd.
func (n *Node) RemoveMember(ctx context.Context, name string) error {
	if err := n.embedded(); err != nil {
		return err
	}
	return RemoveMember(ctx, n.client, name)
}

// embedded refuses member changes to an etcd hostd does not run.
func (n *Node) embedded() error {
	if n.member == nil {
		return fmt.Errorf("%w: this fleet's records are in an etcd of its own (--etcd-endpoints): change its members with etcd's tools", desktop.ErrConflict)
	}
	return nil
}

// Members lists the fleet's etcd members; one added but not yet started
// has no name yet and is listed by its peer URL.
func Members(ctx context.Context, c *clientv3.Client) ([]api.FleetMember, error) {
	resp, err := c.MemberList(ctx)
	if err != nil {
		return nil, unreachable("list the fleet's etcd members", err)
	}
	return fleetMembers(resp.Members), nil
}

// fleetMembers are etcd's members as the API shows them, by peer URL.
func fleetMembers(members []*etcdserverpb.Member) []api.FleetMember {
	out := make([]api.FleetMember, 0, len(members))
	for _, m := range members {
		fm := api.FleetMember{Name: m.Name, Started: m.Name != ""}
		if len(m.PeerURLs) > 0 {
			fm.PeerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			fm.ClientURL = m.ClientURLs[0]
		}
		out = append(out, fm)
	}
	slices.SortFunc(out, func(a, b api.FleetMember) int { return strings.Compare(a.PeerURL, b.PeerURL) })
	return out
}

// AddMember tells the fleet's etcd of a new member, name at peerURL, to be
// started next with --cluster-join, and returns the members it starts
// with (its --cluster-peers, itself among them).
func AddMember(ctx context.Context, c *clientv3.Client, name, peerURL string, tls bool) ([]api.FleetMember, error) {
	if name == "" || strings.ContainsAny(name, "=,/ ") {
		return nil, fmt.Errorf("%w: member name %q: use letters, digits, '-' and '.'", desktop.ErrInvalid, name)
	}
	if _, err := parseMemberURL(peerURL, tls); err != nil {
		return nil, fmt.Errorf("%w: member %s: %v", desktop.ErrInvalid, name, err)
	}
	members, err := Members(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Name == name || m.PeerURL == peerURL {
			return nil, fmt.Errorf("%w: the fleet's etcd already has a member %q at %s: remove it first (hostd cluster member remove)", desktop.ErrConflict, m.Name, m.PeerURL)
		}
	}
	added, err := addWhenHealthy(ctx, c, peerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: add etcd member %s at %s: %v (etcd adds one only while its members can agree after it: are they all up?)", desktop.ErrConflict, name, peerURL, err)
	}
	members = fleetMembers(added)
	for i, m := range members {
		if m.PeerURL == peerURL {
			members[i].Name = name
		}
	}
	return members, nil
}

// healthyWait bounds the wait for etcd to take a member: it refuses one
// as "unhealthy" until every member has been connected for 5 s, as just
// after a start or a reconnection.
const healthyWait = 30 * time.Second

// addWhenHealthy adds the member at peerURL, waiting out etcd's "unhealthy
// cluster" refusals for up to healthyWait, and returns the members after.
func addWhenHealthy(ctx context.Context, c *clientv3.Client, peerURL string) ([]*etcdserverpb.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, healthyWait)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := c.MemberAdd(ctx, []string{peerURL})
		if err == nil {
			return resp.Members, nil
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-tick.C:
		}
	}
}

// RemoveMember takes member name (or, for one added but never started,
// the member at that peer URL) out of the fleet's etcd.
func RemoveMember(ctx context.Context, c *clientv3.Client, name string) error {
	resp, err := c.MemberList(ctx)
	if err != nil {
		return unreachable("list the fleet's etcd members", err)
	}
	for _, m := range resp.Members {
		if m.Name != name && !slices.Contains(m.PeerURLs, name) {
			continue
		}
		if len(resp.Members) == 1 {
			return fmt.Errorf("%w: %s is the fleet's last etcd member", desktop.ErrConflict, name)
		}
		if _, err := c.MemberRemove(ctx, m.ID); err != nil {
			return fmt.Errorf("%w: remove etcd member %s: %v (etcd removes one only while the others can agree after it)", desktop.ErrConflict, name, err)
		}
		return nil
	}
	return fmt.Errorf("%w: the fleet's etcd has no member %q (hostd cluster member list)", desktop.ErrNotFound, name)
}
