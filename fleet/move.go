package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

var _ desktop.MoveStore = (*Records)(nil)

// BeginMove marks a desktop record of this host as moving to host to: only
// that host may take it (TakeMoved). Other writes of the record keep the
// mark until EndMove takes it away.
func (r *Records) BeginMove(d desktop.Desktop, to string) error {
	if to == r.host {
		return fmt.Errorf("%w: desktop %s already runs on %s", desktop.ErrInvalid, d.ID, to)
	}
	r.moving.Store(d.ID, to)
	if err := r.PutDesktop(d); err != nil {
		r.moving.Delete(d.ID)
		return fmt.Errorf("mark desktop %s as moving: %w", d.ID, err)
	}
	return nil
}

// EndMove takes a failed move's mark off a desktop record, if the record
// is still this host's; taken says another host took it meanwhile (the
// move's target, whose answer did not arrive).
func (r *Records) EndMove(d desktop.Desktop) (taken bool, err error) {
	to, _ := r.moving.LoadAndDelete(d.ID)
	err = r.PutDesktop(d)
	switch {
	case errors.Is(err, ErrNotOwned):
		return true, nil
	case err != nil && to != nil:
		// Not known: marked again, so a later EndMove still settles it.
		r.moving.Store(d.ID, to)
	}
	return false, err
}

// TakeMoved makes a desktop record this host's, in one transaction on the
// record's revision: only while it is host from's and marked as moving
// here. So a record is never in two places: the source's EndMove and this
// take cannot both succeed.
func (r *Records) TakeMoved(d desktop.Desktop, from string) error {
	r.moving.Delete(d.ID) // a move of its own, long over
	key := r.desktopKey(d.ID)
	gen := r.generation.Load()
	genKey := generationKey(r.prefix, r.host)
	what := "take desktop " + d.ID + " from " + from
	v, err := json.Marshal(desktopRecord{Host: r.host, Generation: gen, Desktop: d})
	if err != nil {
		return err
	}
	return retry(what, func(ctx context.Context) error {
		for {
			read, err := r.c.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(genKey)).Commit()
			if err != nil {
				return err
			}
			kvs := read.Responses[0].GetResponseRange().Kvs
			if len(kvs) != 1 {
				return fmt.Errorf("%w: %s: the desktop has no record", desktop.ErrConflict, what)
			}
			rec, err := decodeDesktopRecord(kvs[0].Value)
			if err != nil {
				return err
			}
			if rec.Host == r.host && rec.Generation == gen && rec.MovingTo == "" {
				// An earlier try's commit that went through, though its
				// answer did not arrive.
				return nil
			}
			if rec.Host != from || rec.MovingTo != r.host {
				return fmt.Errorf("%w: %s: its record is not moving here (it is %s's, moving to %q)", desktop.ErrConflict, what, rec.Host, rec.MovingTo)
			}
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)}
			if gen > 0 {
				if now := generations(r.prefix, read.Responses[1].GetResponseRange().Kvs)[r.host]; now != gen {
					return superseded(what, r.host, gen, now)
				}
				cmps = append(cmps, clientv3.Compare(clientv3.Value(genKey), "=", strconv.FormatUint(gen, 10)))
			}
			txn, err := r.c.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(v))).Commit()
			if err != nil {
				return err
			}
			if txn.Succeeded {
				return nil
			}
		}
	})
}

// MoveTarget is the host a desktop of this host moves to, and its peer
// address (moveTarget chooses). The target checks its room again when the
// desktop comes.
func (n *Node) MoveTarget(ctx context.Context, to string, memoryMiB int) (name, peer string, err error) {
	hosts, err := Hosts(ctx, n.client, n.prefix)
	if err != nil {
		return "", "", err
	}
	// The loads the hosts last said are up to a third of a lease old: a
	// drain's moves count by the records, which each move turns.
	all, err := Desktops(ctx, n.client, n.prefix)
	if err != nil {
		return "", "", err
	}
	byHost := map[string][]desktop.Desktop{}
	for _, d := range all {
		byHost[d.Host] = append(byHost[d.Host], d.Desktop)
	}
	for i := range hosts {
		hosts[i].Desktops, hosts[i].UsedMemoryMiB = desktop.Holding(byHost[hosts[i].Name])
	}
	h, err := moveTarget(hosts, n.cfg.Host, n.describe().Restore, to, memoryMiB)
	if err != nil {
		return "", "", err
	}
	addr, err := h.peerAddress()
	return h.Name, addr, err
}

// moveTarget is to, when named (a live host but self, not draining, that
// restores what self's machines run), or else the such host with room for
// one more desktop of memoryMiB and the most guest memory free then.
func moveTarget(hosts []Host, self string, restore RestoreKey, to string, memoryMiB int) (Host, error) {
	var best *Host
	for i, h := range hosts {
		switch {
		case to != "" && h.Name != to:
			continue
		case h.Name == self && to != "":
			return Host{}, fmt.Errorf("%w: the desktop already runs on %s", desktop.ErrInvalid, h.Name)
		case h.Name == self:
			continue
		case to != "" && h.Draining:
			return Host{}, fmt.Errorf("%w: host %s is draining: it takes no desktops (hostd fleet undrain %s)", desktop.ErrConflict, to, to)
		case to != "" && h.Restore != restore:
			return Host{}, fmt.Errorf("%w: host %s runs another QEMU build, machine type or accelerator (%+v, here %+v): a running machine moves only between hosts of the same", desktop.ErrConflict, to, h.Restore, restore)
		case h.Draining || h.Restore != restore:
			continue
		}
		free := h.MemoryMiB - h.UsedMemoryMiB - memoryMiB
		if to == "" && (free < 0 || h.Desktops+1 > h.MaxDesktops) {
			continue
		}
		if best == nil || free > best.MemoryMiB-best.UsedMemoryMiB-memoryMiB {
			best = &hosts[i]
		}
	}
	switch {
	case best == nil && to != "":
		return Host{}, fmt.Errorf("%w: host %s is not a live host of the fleet (hostd fleet status)", desktop.ErrNotFound, to)
	case best == nil:
		return Host{}, fmt.Errorf("%w: %w: no other live host that is not draining has room for a desktop of %d MiB", desktop.ErrCapacity, ErrNoRoom, memoryMiB)
	}
	return *best, nil
}
