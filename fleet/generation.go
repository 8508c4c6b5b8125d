package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

// Generations: each start of a host's hostd takes the next number under
// Prefix+"generations/"+Host, and every desktop record it writes carries
// it. A record of an earlier generation is one the host has not yet
// reconciled since it came back (its machine may have died with the old
// hostd): the fleet shows it host_lost, and passes no request to it, until
// the new generation has recovered it and written it again (Reconcile).

func generationKey(prefix, host string) string { return prefix + "generations/" + host }

// StartGeneration takes this host's next generation, which its record
// writes carry from then on. Call it once per start, before recovery.
func (r *Records) StartGeneration(ctx context.Context) (uint64, error) {
	key := generationKey(r.prefix, r.host)
	var next uint64
	err := retryCtx(ctx, "take this host's generation", func(ctx context.Context) error {
		for {
			resp, err := r.c.Get(ctx, key)
			if err != nil {
				return err
			}
			cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
			next = 1
			if len(resp.Kvs) == 1 {
				cur, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
				if err != nil {
					return fmt.Errorf("%w: generation of host %s: %q", errBadRecord, r.host, resp.Kvs[0].Value)
				}
				next = cur + 1
				cmp = clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
			}
			txn, err := r.c.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, strconv.FormatUint(next, 10))).Commit()
			if err != nil {
				return err
			}
			if txn.Succeeded {
				return nil
			}
		}
	})
	if err != nil {
		return 0, err
	}
	r.generation.Store(next)
	return next, nil
}

// Reconcile writes this host's desktop records of earlier generations
// again, as current says each desktop is once recovery has run (running
// again, or failed), with this generation: from then on the fleet shows
// them as they are. A record current does not hold is one recovery
// dropped (and failed to delete): it is deleted, and returned. A record
// changed meanwhile is left to the write that changed it.
func (r *Records) Reconcile(ctx context.Context, current func(id string) (desktop.Desktop, bool)) (written int, dropped []string, err error) {
	gen := r.generation.Load()
	genKey := generationKey(r.prefix, r.host)
	fence := clientv3.Compare(clientv3.Value(genKey), "=", strconv.FormatUint(gen, 10))
	err = retryCtx(ctx, "reconcile this host's records", func(ctx context.Context) error {
		resp, err := r.c.Get(ctx, r.prefix+"desktops/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			rec, err := decodeDesktopRecord(kv.Value)
			if err != nil {
				return err
			}
			if rec.Host != r.host || rec.Generation >= gen {
				continue
			}
			key := string(kv.Key)
			op := clientv3.OpDelete(key)
			d, held := current(rec.Desktop.ID)
			if held {
				rec.Generation, rec.Desktop = gen, d
				v, err := json.Marshal(rec)
				if err != nil {
					return err
				}
				op = clientv3.OpPut(key, string(v))
			}
			txn, err := r.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision), fence).
				Then(op).Else(clientv3.OpGet(genKey)).Commit()
			if err != nil {
				return err
			}
			if !txn.Succeeded {
				if now := generations(r.prefix, txn.Responses[0].GetResponseRange().Kvs)[r.host]; now != gen {
					return superseded("reconcile", r.host, gen, now)
				}
			}
			switch {
			case txn.Succeeded && held:
				written++
			case txn.Succeeded:
				dropped = append(dropped, rec.Desktop.ID)
			}
		}
		return nil
	})
	return written, dropped, err
}

// generations reads every host's generation from a range response.
func generations(prefix string, kvs []*mvccpb.KeyValue) map[string]uint64 {
	out := map[string]uint64{}
	for _, kv := range kvs {
		g, err := strconv.ParseUint(string(kv.Value), 10, 64)
		if err == nil {
			out[strings.TrimPrefix(string(kv.Key), prefix+"generations/")] = g
		}
	}
	return out
}

// unreconciled says whether a record's host has started again since
// writing it and not yet reconciled it.
func unreconciled(rec desktopRecord, gens map[string]uint64) bool {
	return rec.Generation < gens[rec.Host]
}
