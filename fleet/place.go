package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

// ErrNoRoom is a placement no live host can take.
var ErrNoRoom = errors.New("no host of the fleet can take the desktop")

// reservationTTL is the lease of a placement's reservation, which the
// placing host keeps alive until Release, however long the create takes
// (a pull first): it bounds how long room stays reserved for a create
// whose placing host died. A variable for tests.
var reservationTTL = 30 * time.Second

// maxPlaceAttempts bounds the placements tried again because another
// write changed the loads in between: a fleet busier than that is told
// so rather than kept waiting.
const maxPlaceAttempts = 100

// reservation is the value under Prefix+"reservations/"+HOST+"/"+ID.
type reservation struct {
	MemoryMiB int    `json:"memory_mib"`
	Snapshot  string `json:"snapshot,omitempty"`
}

// Placement is a host chosen for a desktop and the room reserved there
// until Release, which the create's caller makes once the desktop's own
// record counts it (or the create failed).
type Placement struct {
	Host      Host
	lease     clientv3.LeaseID
	c         *clientv3.Client
	stopAlive context.CancelFunc
}

// Release drops the reservation, with its lease: after the create,
// whether it succeeded (the desktop's record now counts) or failed.
func (p *Placement) Release(ctx context.Context) error {
	p.stopAlive()
	if _, err := p.c.Revoke(ctx, p.lease); err != nil {
		return unreachable("release a placement", err)
	}
	return nil
}

// load is what a host holds: its desktops holding resources, by their
// records, and the placements made for it and not yet released.
type load struct {
	desktops, memoryMiB int
	// pending counts the reservations per snapshot: creates placed there
	// that may take machines from its warm pool.
	pending map[string]int
}

// Place chooses the host for a desktop of snapshot and reserves its room
// there, in one etcd transaction that fails, and is tried again, if any
// desktop record or reservation changed since the loads were read: two
// hosts placing at once never overbook a third.
//
// Which host wins is choose's rule.
func Place(ctx context.Context, c *clientv3.Client, prefix, snapshot, id string) (*Placement, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	hostsKey, desktopsKey, resKey := prefix+"hosts/", prefix+"desktops/", prefix+"reservations/"
	for attempt := 0; ; attempt++ {
		if attempt == maxPlaceAttempts {
			return nil, fmt.Errorf("%w: placing a desktop of %s: the fleet's records changed under %d tries in a row", desktop.ErrUnavailable, snapshot, maxPlaceAttempts)
		}
		read, err := c.Txn(ctx).Then(
			clientv3.OpGet(hostsKey, clientv3.WithPrefix()),
			clientv3.OpGet(desktopsKey, clientv3.WithPrefix()),
			clientv3.OpGet(resKey, clientv3.WithPrefix()),
			clientv3.OpGet(prefix+drainingKey, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
		if err != nil {
			return nil, unreachable("place", err)
		}
		draining := map[string]bool{}
		for _, kv := range read.Responses[3].GetResponseRange().Kvs {
			draining[strings.TrimPrefix(string(kv.Key), prefix+drainingKey)] = true
		}
		var hosts []Host
		for _, kv := range read.Responses[0].GetResponseRange().Kvs {
			h, err := decodeHost(kv.Value)
			if err != nil {
				return nil, err
			}
			if !draining[h.Name] {
				hosts = append(hosts, h)
			}
		}
		loads := map[string]load{}
		for _, kv := range read.Responses[1].GetResponseRange().Kvs {
			rec, err := decodeDesktopRecord(kv.Value)
			if err != nil {
				return nil, err
			}
			if rec.Desktop.State.Holds() {
				l := loads[rec.Host]
				l.desktops++
				l.memoryMiB += rec.Desktop.Resources.MemoryMiB
				loads[rec.Host] = l
			}
		}
		for _, kv := range read.Responses[2].GetResponseRange().Kvs {
			host, _, ok := cutHostKey(string(kv.Key), resKey)
			var r reservation
			if !ok || json.Unmarshal(kv.Value, &r) != nil {
				continue
			}
			l := loads[host]
			l.desktops++
			l.memoryMiB += r.MemoryMiB
			if l.pending == nil {
				l.pending = map[string]int{}
			}
			l.pending[r.Snapshot]++
			loads[host] = l
		}
		chosen, memory, err := choose(hosts, loads, snapshot)
		if err != nil {
			return nil, err
		}
		lease, err := c.Grant(ctx, int64(reservationTTL/time.Second))
		if err != nil {
			return nil, unreachable("place", err)
		}
		key := resKey + chosen.Name + "/" + id
		v, _ := json.Marshal(reservation{MemoryMiB: memory, Snapshot: snapshot})
		rev := read.Header.Revision
		txn, err := c.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(desktopsKey), "<", rev+1).WithPrefix(),
			clientv3.Compare(clientv3.ModRevision(resKey), "<", rev+1).WithPrefix(),
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		).Then(clientv3.OpPut(key, string(v), clientv3.WithLease(lease.ID))).Commit()
		if err != nil {
			c.Revoke(context.WithoutCancel(ctx), lease.ID)
			return nil, unreachable("place", err)
		}
		if txn.Succeeded {
			return &Placement{Host: chosen, lease: lease.ID, c: c, stopAlive: keepAlive(ctx, c, lease.ID)}, nil
		}
		// Another placement or a record changed the loads: read again.
		c.Revoke(context.WithoutCancel(ctx), lease.ID)
	}
}

// keepAlive keeps a reservation's lease alive until the returned function
// is called. Should etcd stop answering, the lease ends on its own.
func keepAlive(ctx context.Context, c *clientv3.Client, lease clientv3.LeaseID) context.CancelFunc {
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	acks, err := c.KeepAlive(kctx, lease)
	if err != nil {
		return stop
	}
	go func() {
		for range acks { // drained, as the client asks
		}
	}()
	return stop
}

// choose scores the hosts for a desktop of snapshot under their loads: a
// pure function. Candidates have room under their caps and either hold
// the snapshot or can restore it (the same RestoreKey as a host that
// holds it: it pulls the files before the create). Hosts that hold it come
// first, then those with machines of it ready in their warm pool that
// creates placed there and not yet made will not take (a create there
// takes milliseconds, not a restore), then the most free memory
// after the desktop, then the first name.
func choose(hosts []Host, loads map[string]load, snapshot string) (Host, int, error) {
	type candidate struct {
		h           Host
		holds, warm bool
		free        int
	}
	memory, restorable := 0, map[RestoreKey]bool{}
	for _, h := range hosts {
		if s, ok := h.Holds(snapshot); ok {
			memory, restorable[h.Restore] = s.MemoryMiB, true
		}
	}
	if len(restorable) == 0 {
		return Host{}, 0, fmt.Errorf("%w: no live host holds snapshot %s: bake it on a host of the fleet", desktop.ErrNotFound, snapshot)
	}
	var cands []candidate
	for _, h := range hosts {
		held, holds := h.Holds(snapshot)
		if !holds && !restorable[h.Restore] {
			continue
		}
		l := loads[h.Name]
		if l.desktops+1 > h.MaxDesktops || l.memoryMiB+memory > h.MemoryMiB {
			continue
		}
		cands = append(cands, candidate{h, holds, held.Warm > l.pending[snapshot], h.MemoryMiB - l.memoryMiB - memory})
	}
	if len(cands) == 0 {
		return Host{}, 0, fmt.Errorf("%w: %w: every host that can restore snapshot %s is at its --max-desktops or --max-memory-mib", desktop.ErrCapacity, ErrNoRoom, snapshot)
	}
	best := slices.MaxFunc(cands, func(a, b candidate) int {
		if c := compareBool(a.holds, b.holds); c != 0 {
			return c
		}
		if c := compareBool(a.warm, b.warm); c != 0 {
			return c
		}
		if c := cmp.Compare(a.free, b.free); c != 0 {
			return c
		}
		return cmp.Compare(b.h.Name, a.h.Name) // the first name wins a tie
	})
	return best.h, memory, nil
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// cutHostKey splits prefix+HOST+"/"+REST.
func cutHostKey(key, prefix string) (host, rest string, ok bool) {
	if len(key) <= len(prefix) || key[:len(prefix)] != prefix {
		return "", "", false
	}
	tail := key[len(prefix):]
	for i := range len(tail) {
		if tail[i] == '/' {
			return tail[:i], tail[i+1:], i > 0
		}
	}
	return "", "", false
}
