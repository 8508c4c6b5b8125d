package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
)

// SharedToken is the fleet's daemon token: every host answers the same
// token, so a request any host proxies to another is authenticated by the
// host that serves it. The first host to ask puts its own (a transaction
// that writes only if none is there); every later one takes what is there.
func SharedToken(ctx context.Context, c *clientv3.Client, prefix, own string) (string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	key := prefix + "token"
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, own)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", unreachable("the fleet's token", err)
	}
	if resp.Succeeded {
		return own, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || len(kvs[0].Value) == 0 {
		return "", fmt.Errorf("fleet: the fleet's token under %s is empty", key)
	}
	return string(kvs[0].Value), nil
}

// Locate names the host that runs a desktop and its API address; ok is
// false when no host of the fleet has the desktop. A desktop whose host is
// not listed (its lease ran out) is desktop.ErrUnavailable.
func Locate(ctx context.Context, c *clientv3.Client, prefix, id string) (host, address string, ok bool, err error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	resp, err := c.Get(ctx, prefix+"desktops/"+id)
	if err != nil {
		return "", "", false, unreachable("locate desktop "+id, err)
	}
	if len(resp.Kvs) == 0 {
		return "", "", false, nil
	}
	rec, err := decodeDesktopRecord(resp.Kvs[0].Value)
	if err != nil {
		return "", "", false, err
	}
	hosts, err := c.Txn(ctx).Then(
		clientv3.OpGet(hostKey(prefix, rec.Host)),
		clientv3.OpGet(generationKey(prefix, rec.Host)),
	).Commit()
	if err != nil {
		return "", "", false, unreachable("locate desktop "+id, err)
	}
	hostKV := hosts.Responses[0].GetResponseRange().Kvs
	if len(hostKV) == 0 {
		return rec.Host, "", false, fmt.Errorf("%w: desktop %s runs on host %s, which the fleet lost (its lease ran out); it answers again once that host is back", desktop.ErrUnavailable, id, rec.Host)
	}
	if unreconciled(rec, generations(prefix, hosts.Responses[1].GetResponseRange().Kvs)) {
		return rec.Host, "", false, fmt.Errorf("%w: desktop %s runs on host %s, which has started again and not yet recovered it; it answers once it has", desktop.ErrUnavailable, id, rec.Host)
	}
	h, err := decodeHost(hostKV[0].Value)
	if err != nil {
		return "", "", false, err
	}
	addr, err := h.peerAddress()
	if err != nil {
		return rec.Host, "", false, err
	}
	return rec.Host, addr, true, nil
}

// FleetDesktop is a desktop record of the fleet: the desktop, its host,
// and whether that host is lost (its lease ran out, or it has started
// again and not yet reconciled the record: the desktop's state is unknown
// until the host is back and has).
type FleetDesktop struct {
	Host    string
	Lost    bool
	Desktop desktop.Desktop
}

// Desktops lists every desktop record of the fleet, read at one revision
// with the live hosts.
func Desktops(ctx context.Context, c *clientv3.Client, prefix string) ([]FleetDesktop, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(prefix+"hosts/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(prefix+"desktops/", clientv3.WithPrefix()),
		clientv3.OpGet(prefix+"generations/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, unreachable("list the fleet's desktops", err)
	}
	live := map[string]bool{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		live[strings.TrimPrefix(string(kv.Key), prefix+"hosts/")] = true
	}
	gens := generations(prefix, resp.Responses[2].GetResponseRange().Kvs)
	var out []FleetDesktop
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		rec, err := decodeDesktopRecord(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, FleetDesktop{Host: rec.Host, Lost: !live[rec.Host] || unreconciled(rec, gens), Desktop: rec.Desktop})
	}
	return out, nil
}

// ErrTokenChanged is a rotation from a token that is no longer the
// fleet's: another host rotated it first.
var ErrTokenChanged = errors.New("the fleet's token changed meanwhile")

// SetSharedToken replaces the fleet's daemon token, if it is still old
// (hostd token rotate on any host; two at once: one wins, the other is
// ErrTokenChanged); every host follows the change (WatchToken).
func SetSharedToken(ctx context.Context, c *clientv3.Client, prefix, old, tok string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if tok == "" {
		return fmt.Errorf("fleet: an empty token is no token")
	}
	key := prefix + "token"
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", old)).Then(clientv3.OpPut(key, tok)).Commit()
	if err != nil {
		return unreachable("rotate the fleet's token", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %w: another host rotated it first; its new token reaches this host's token file within moments", desktop.ErrConflict, ErrTokenChanged)
	}
	return nil
}

// WatchToken calls adopt with the fleet's daemon token each time it
// changes, until ctx ends. A watch that breaks (etcd out of reach, its
// history compacted) is started again from the token as it is then, so
// no change is missed for long.
func WatchToken(ctx context.Context, c *clientv3.Client, prefix string, adopt func(string)) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	key := prefix + "token"
	for ctx.Err() == nil {
		resp, err := c.Get(ctx, key)
		if err != nil {
			if !waitRetry(ctx) {
				return
			}
			continue
		}
		if len(resp.Kvs) == 1 && len(resp.Kvs[0].Value) > 0 {
			adopt(string(resp.Kvs[0].Value))
		}
		watchToken(ctx, c, key, resp.Header.Revision+1, adopt)
		if !waitRetry(ctx) {
			return
		}
	}
}

// watchToken follows key from revision rev on until the watch breaks,
// and ends that watch.
func watchToken(ctx context.Context, c *clientv3.Client, key string, rev int64, adopt func(string)) {
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer stop()
	for w := range c.Watch(wctx, key, clientv3.WithRev(rev)) {
		if w.Err() != nil {
			return
		}
		for _, ev := range w.Events {
			if ev.Type == clientv3.EventTypePut && len(ev.Kv.Value) > 0 {
				adopt(string(ev.Kv.Value))
			}
		}
	}
}

// waitRetry waits a moment before a broken watch starts again; false when
// ctx ended first.
func waitRetry(ctx context.Context) bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
