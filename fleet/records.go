package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/volume"
)

// Records keeps one host's records (desktops and volumes) in the fleet's
// etcd: the same interface as the single-host bbolt store (hostd/store),
// held to the same tests (hostd/store/storetest).
//
// Keys: Prefix+"desktops/"+ID holds a desktopRecord (the desktop and the
// host that runs it: one key space for the fleet, so any host can find
// any desktop); Prefix+"volumes/"+Host+"/"+Name a volume (a volume's
// files are on its host).
type Records struct {
	c      *clientv3.Client
	host   string
	prefix string
	// generation is this start's (StartGeneration), which each desktop
	// record written carries.
	generation atomic.Uint64
	// moving are this host's desktops a move is handing to another host,
	// by id: every write of their records keeps the mark (BeginMove).
	moving sync.Map
}

var (
	_ desktop.Store = (*Records)(nil)
	_ volume.Store  = (*Records)(nil)
)

// DefaultPrefix is where warmdesk's keys live in etcd.
const DefaultPrefix = "/wd/"

// recordTimeout bounds each call: a host cut off from etcd (no majority
// reachable) fails its record changes after it, and changes none until
// etcd answers again. Within it each attempt has attemptTimeout: a call
// that reached a member whose leader has just died waits for etcd's own
// request timeout (7 s by default) unless given up and tried again, and
// by then the others have elected a new leader (1 to 2 s).
const (
	recordTimeout  = 10 * time.Second
	attemptTimeout = 2 * time.Second
)

// ErrNotOwned is a write to a desktop record another host holds.
var ErrNotOwned = fmt.Errorf("%w", desktop.ErrNotHere)

// ErrSuperseded is a write by a hostd whose generation is no longer its
// host's: another hostd started under the same host name.
var ErrSuperseded = errors.New("this hostd's generation was superseded")

func superseded(what, host string, gen, now uint64) error {
	return fmt.Errorf("%w: %s: %w: this hostd is generation %d of host %s, and generation %d has started since: two hostd run as %s; stop one, and restart the other", desktop.ErrUnavailable, what, ErrSuperseded, gen, host, now, host)
}

// desktopRecord is the value under a desktop's key.
type desktopRecord struct {
	Host       string          `json:"host"`
	Generation uint64          `json:"generation,omitempty"`
	Desktop    desktop.Desktop `json:"desktop"`
	// MovingTo names the host a move hands the desktop to (BeginMove).
	MovingTo string `json:"moving_to,omitempty"`
}

func decodeDesktopRecord(b []byte) (desktopRecord, error) {
	var rec desktopRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%w: desktop record: %w", errBadRecord, err)
	}
	return rec, nil
}

// NewRecords is host's records in the etcd c reaches, under prefix
// (DefaultPrefix when empty).
func NewRecords(c *clientv3.Client, host, prefix string) *Records {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Records{c: c, host: host, prefix: prefix}
}

func (r *Records) desktopKey(id string) string { return r.prefix + "desktops/" + id }
func (r *Records) volumePrefix() string        { return r.prefix + "volumes/" + r.host + "/" }

// retry runs call, each attempt bounded by attemptTimeout, until it
// succeeds or recordTimeout has passed, waiting a little longer after each
// failure. Only failures another try may mend are tried again (no member
// answered, no leader yet, the attempt's time ran out); etcd refusing the
// call (out of space, too large, denied) is returned as it is.
func retry(what string, call func(ctx context.Context) error) error {
	return retryCtx(context.Background(), what, call)
}

// retryCtx is retry within parent.
func retryCtx(parent context.Context, what string, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, recordTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		err := call(actx)
		acancel()
		if err == nil {
			return nil
		}
		if !transient(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return unreachable(what, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// transient says whether another try of an etcd call may succeed.
func transient(err error) bool {
	if errors.Is(err, ErrNotOwned) || errors.Is(err, ErrSuperseded) || errors.Is(err, errBadRecord) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	code := status.Code(err)
	// The client turns etcd's own errors ("leader changed", "no
	// leader") into EtcdError, whose code status.Code does not see.
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// errBadRecord marks a record that cannot be read: trying again will not
// help.
var errBadRecord = errors.New("unreadable record")

// unreachable words an etcd failure for the records' callers.
func unreachable(op string, err error) error {
	return fmt.Errorf("%w: %s: the fleet's records (etcd) did not answer: %w", desktop.ErrUnavailable, op, err)
}

// LoadDesktops returns this host's desktop records.
func (r *Records) LoadDesktops() ([]desktop.Desktop, error) {
	var out []desktop.Desktop
	err := retry("load desktops", func(ctx context.Context) error {
		resp, err := r.c.Get(ctx, r.prefix+"desktops/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		out = nil
		for _, kv := range resp.Kvs {
			var rec desktopRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				return fmt.Errorf("%w: desktop record %s: %w", errBadRecord, kv.Key, err)
			}
			if rec.Host == r.host {
				out = append(out, rec.Desktop)
			}
		}
		return nil
	})
	return out, err
}

// PutDesktop writes a desktop record of this host. A record another host
// holds is not overwritten (ErrNotOwned): the write is a transaction on
// the key's revision, so a change made meanwhile is seen.
func (r *Records) PutDesktop(d desktop.Desktop) error {
	to, _ := r.moving.Load(d.ID)
	movingTo, _ := to.(string)
	v, err := json.Marshal(desktopRecord{Host: r.host, Generation: r.generation.Load(), Desktop: d, MovingTo: movingTo})
	if err != nil {
		return err
	}
	return r.ownedTxn("put desktop "+d.ID, r.desktopKey(d.ID), clientv3.OpPut(r.desktopKey(d.ID), string(v)))
}

// DeleteDesktop removes a desktop record of this host; one that is not
// there is not an error.
func (r *Records) DeleteDesktop(id string) error {
	return r.ownedTxn("delete desktop "+id, r.desktopKey(id), clientv3.OpDelete(r.desktopKey(id)))
}

// ownedTxn runs op on key if the key is absent or this host's, retrying
// when another writer changed it between the read and the write.
func (r *Records) ownedTxn(what, key string, op clientv3.Op) error {
	gen := r.generation.Load()
	genKey := generationKey(r.prefix, r.host)
	return retry(what, func(ctx context.Context) error {
		for {
			read, err := r.c.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(genKey)).Commit()
			if err != nil {
				return err
			}
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
			if gen > 0 {
				// The generation fences this hostd off once another
				// took this host's name: its writes would show as lost.
				if now := generations(r.prefix, read.Responses[1].GetResponseRange().Kvs)[r.host]; now != gen {
					return superseded(what, r.host, gen, now)
				}
				cmps = append(cmps, clientv3.Compare(clientv3.Value(genKey), "=", strconv.FormatUint(gen, 10)))
			}
			if kvs := read.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
				kv := kvs[0]
				var rec desktopRecord
				if err := json.Unmarshal(kv.Value, &rec); err != nil {
					return fmt.Errorf("%w: %s: record %s: %w", errBadRecord, what, key, err)
				}
				if rec.Host != r.host {
					return fmt.Errorf("%s: %w (%s)", what, ErrNotOwned, rec.Host)
				}
				cmps[0] = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
			}
			txn, err := r.c.Txn(ctx).If(cmps...).Then(op).Commit()
			if err != nil {
				return err
			}
			if txn.Succeeded {
				return nil
			}
		}
	})
}

// LoadVolumes returns this host's volume records.
func (r *Records) LoadVolumes() ([]volume.Volume, error) {
	var out []volume.Volume
	err := retry("load volumes", func(ctx context.Context) error {
		resp, err := r.c.Get(ctx, r.volumePrefix(), clientv3.WithPrefix())
		if err != nil {
			return err
		}
		out = nil
		for _, kv := range resp.Kvs {
			var v volume.Volume
			if err := json.Unmarshal(kv.Value, &v); err != nil {
				return fmt.Errorf("%w: volume record %s: %w", errBadRecord, kv.Key, err)
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// PutVolume writes a volume record.
func (r *Records) PutVolume(v volume.Volume) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return retry("put volume "+v.Name, func(ctx context.Context) error {
		_, err := r.c.Put(ctx, r.volumePrefix()+v.Name, string(b))
		return err
	})
}

// DeleteVolume removes a volume record.
func (r *Records) DeleteVolume(name string) error {
	return retry("delete volume "+name, func(ctx context.Context) error {
		_, err := r.c.Delete(ctx, r.volumePrefix()+name)
		return err
	})
}
