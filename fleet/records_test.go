package fleet

import (
	"errors"
	"testing"

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
