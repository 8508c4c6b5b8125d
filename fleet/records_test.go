package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/store/storetest"
)

// closingRecords is Records with its own client, closed as a hostd's
// would be when it stops.
type closingRecords struct {
	*Records
	c *clientv3.Client
}

func (r closingRecords) Close() error { return r.c.Close() }

// The fleet's records are held to the same suite as the bbolt store.
func TestRecordsSuite(t *testing.T) {
	tc := startCluster(t, 1, false)
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		prefix := freshPrefix()
		return func(t *testing.T) storetest.Records {
			c := tc.client(t, 0)
			return closingRecords{NewRecords(c, "h1", prefix), c}
		}
	})
}

// Two hosts share the key space: each loads only its own desktops, and
// neither may change the other's.
func TestRecordsOfTwoHosts(t *testing.T) {
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	a := NewRecords(tc.client(t, 0), "a", prefix)
	b := NewRecords(tc.client(t, 0), "b", prefix)
	if err := a.PutDesktop(desktop.Desktop{ID: "d-a", State: desktop.StateRunning}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutDesktop(desktop.Desktop{ID: "d-b", State: desktop.StateRunning}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		r    *Records
		want string
	}{{a, "d-a"}, {b, "d-b"}} {
		ds, err := tt.r.LoadDesktops()
		if err != nil || len(ds) != 1 || ds[0].ID != tt.want {
			t.Fatalf("host %s loads %+v, %v; want %s alone", tt.r.host, ds, err, tt.want)
		}
	}
	if err := b.PutDesktop(desktop.Desktop{ID: "d-a", State: desktop.StateFailed}); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("b overwrote a's record: %v", err)
	}
	if err := b.DeleteDesktop("d-a"); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("b deleted a's record: %v", err)
	}
	ds, err := a.LoadDesktops()
	if err != nil || len(ds) != 1 || ds[0].State != desktop.StateRunning {
		t.Fatalf("a's record after b's tries: %+v, %v", ds, err)
	}
}

// A host that starts again takes a new generation: until it has
// reconciled its records (written each again as its recovery holds it,
// or deleted it), the fleet shows them host_lost and passes nothing to
// them, though its old lease may still list it.
func TestARestartedHostsRecordsAreLostUntilReconciled(t *testing.T) {
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	c := tc.client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := NewRecords(c, "a", prefix)
	if gen, err := before.StartGeneration(ctx); err != nil || gen != 1 {
		t.Fatalf("the first generation: %d, %v; want 1", gen, err)
	}
	if _, err := Join(ctx, c, prefix, Host{Name: "a", Address: "127.0.0.21:8787", Peer: "127.0.0.21:8788"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d-1", "d-2", "d-3"} {
		if err := before.PutDesktop(desktop.Desktop{ID: id, State: desktop.StateRunning}); err != nil {
			t.Fatal(err)
		}
	}
	var states map[string]desktop.State
	lost := func() map[string]bool {
		t.Helper()
		ds, err := Desktops(ctx, c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		out, st := map[string]bool{}, map[string]desktop.State{}
		for _, d := range ds {
			out[d.Desktop.ID], st[d.Desktop.ID] = d.Lost, d.Desktop.State
		}
		states = st
		return out
	}
	if l := lost(); l["d-1"] || l["d-2"] {
		t.Fatalf("lost before any restart: %v", l)
	}

	after := NewRecords(c, "a", prefix)
	if gen, err := after.StartGeneration(ctx); err != nil || gen != 2 {
		t.Fatalf("the generation after a restart: %d, %v; want 2", gen, err)
	}
	if l := lost(); !l["d-1"] || !l["d-2"] || !l["d-3"] {
		t.Fatalf("after the restart, before recovery: lost %v; want all", l)
	}
	// The earlier hostd, were it still running (two under one name), is
	// fenced off: its writes would show as lost.
	if err := before.PutDesktop(desktop.Desktop{ID: "d-1", State: desktop.StateRunning}); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("the superseded generation wrote a record: %v", err)
	}
	// A third start before the second has reconciled: the second's
	// reconcile, which would delete what its recovery does not hold, is
	// refused and deletes nothing; the third goes on.
	third := NewRecords(c, "a", prefix)
	if gen, err := third.StartGeneration(ctx); err != nil || gen != 3 {
		t.Fatalf("the third generation: %d, %v", gen, err)
	}
	if _, _, err := after.Reconcile(ctx, func(string) (desktop.Desktop, bool) { return desktop.Desktop{}, false }); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("a superseded generation reconciled: %v", err)
	}
	if l := lost(); len(l) != 3 {
		t.Fatalf("after the superseded reconcile: records %v; want all three still there", l)
	}
	after = third
	if _, _, _, err := Locate(ctx, c, prefix, "d-1"); !errors.Is(err, desktop.ErrUnavailable) {
		t.Fatalf("a request for an unreconciled desktop was located: %v", err)
	}
	// Recovery finds d-2's machine gone, and says so.
	if err := after.PutDesktop(desktop.Desktop{ID: "d-2", State: desktop.StateFailed}); err != nil {
		t.Fatal(err)
	}
	if l := lost(); !l["d-1"] || l["d-2"] {
		t.Fatalf("after d-2's record was written again: lost %v; want d-1 alone", l)
	}
	// Recovery holds d-1 as failed, though its write of that did not
	// reach etcd, and dropped d-3 without deleting its record.
	held := map[string]desktop.Desktop{
		"d-1": {ID: "d-1", State: desktop.StateFailed},
		"d-2": {ID: "d-2", State: desktop.StateFailed},
	}
	current := func(id string) (desktop.Desktop, bool) { d, ok := held[id]; return d, ok }
	if n, dropped, err := after.Reconcile(ctx, current); err != nil || n != 1 || len(dropped) != 1 || dropped[0] != "d-3" {
		t.Fatalf("reconcile wrote %d records and dropped %v, %v; want d-1's written, d-3's dropped", n, dropped, err)
	}
	if l := lost(); l["d-1"] || l["d-2"] || len(l) != 2 {
		t.Fatalf("after reconciling: lost %v; want d-1 and d-2, neither lost", l)
	}
	if states["d-1"] != desktop.StateFailed {
		t.Fatalf("d-1 after reconciling is %s; want what recovery holds, failed", states["d-1"])
	}
	if _, addr, ok, err := Locate(ctx, c, prefix, "d-1"); err != nil || !ok || addr != "127.0.0.21:8788" {
		t.Fatalf("d-1 after reconciling: %s, %v, %v", addr, ok, err)
	}
	if n, dropped, err := after.Reconcile(ctx, current); err != nil || n != 0 || len(dropped) != 0 {
		t.Fatalf("a second reconcile wrote %d records and dropped %v, %v; want none", n, dropped, err)
	}
}

// What etcd says while it elects is tried again; what it refuses is not.
func TestTransient(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrLeaderChanged, true},
		{fmt.Errorf("put: %w", rpctypes.ErrNoLeader), true},
		{context.DeadlineExceeded, true},
		{rpctypes.ErrRequestTooLarge, false},
		{rpctypes.ErrNoSpace, false},
		{fmt.Errorf("put: %w", ErrNotOwned), false},
		{fmt.Errorf("put: %w", ErrSuperseded), false},
	} {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
