package fleet

import (
	"errors"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

// A record moves only to the host it is marked as moving to, only while
// its source has not written it since, and never stays with both: the
// source's EndMove after the take reports the take, and a take after
// EndMove is refused.
func TestARecordMovesToOneHostOnly(t *testing.T) {
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	a := NewRecords(tc.client(t, 0), "a", prefix)
	b := NewRecords(tc.client(t, 0), "b", prefix)
	c := NewRecords(tc.client(t, 0), "c", prefix)
	d := desktop.Desktop{ID: "d-1", State: desktop.StateRunning}
	if err := a.PutDesktop(d); err != nil {
		t.Fatal(err)
	}
	if err := b.TakeMoved(d, "a"); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("a record not marked as moving was taken: %v", err)
	}
	if err := b.BeginMove(d, "c"); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("another host marked a's record: %v", err)
	}
	if err := a.BeginMove(d, "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.TakeMoved(d, "a"); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("a host the record is not moving to took it: %v", err)
	}
	if err := b.TakeMoved(d, "c"); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("a take naming the wrong source succeeded: %v", err)
	}
	if err := b.TakeMoved(d, "a"); err != nil {
		t.Fatal(err)
	}
	if ds, _ := b.LoadDesktops(); len(ds) != 1 || ds[0].ID != d.ID {
		t.Fatalf("b loads %+v after the take", ds)
	}
	if ds, _ := a.LoadDesktops(); len(ds) != 0 {
		t.Fatalf("a still loads %+v after the take", ds)
	}
	if taken, err := a.EndMove(d); err != nil || !taken {
		t.Fatalf("the source's EndMove after the take: taken %v, %v; want taken", taken, err)
	}

	// The other way round: the source ends the move first; the target's
	// take is then refused, and the record stays the source's, unmarked.
	d2 := desktop.Desktop{ID: "d-2", State: desktop.StateRunning}
	if err := a.PutDesktop(d2); err != nil {
		t.Fatal(err)
	}
	if err := a.BeginMove(d2, "b"); err != nil {
		t.Fatal(err)
	}
	if taken, err := a.EndMove(d2); err != nil || taken {
		t.Fatalf("EndMove before any take: taken %v, %v", taken, err)
	}
	if err := b.TakeMoved(d2, "a"); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("a take after the source ended the move: %v", err)
	}
	if ds, _ := a.LoadDesktops(); len(ds) != 1 || ds[0].ID != d2.ID {
		t.Fatalf("a loads %+v, want d-2 still", ds)
	}
	if err := a.BeginMove(d2, "a"); !errors.Is(err, desktop.ErrInvalid) {
		t.Fatalf("a move to the host itself: %v", err)
	}

	// A write of the record while it moves keeps the mark; a take tried
	// again after its commit went through is the take.
	d3 := desktop.Desktop{ID: "d-3", State: desktop.StateRunning}
	if err := a.PutDesktop(d3); err != nil {
		t.Fatal(err)
	}
	if err := a.BeginMove(d3, "b"); err != nil {
		t.Fatal(err)
	}
	d3.Labels = map[string]string{"written": "during the move"}
	if err := a.PutDesktop(d3); err != nil {
		t.Fatal(err)
	}
	if err := b.TakeMoved(d3, "a"); err != nil {
		t.Fatalf("a take after a write during the move: %v", err)
	}
	if err := b.TakeMoved(d3, "a"); err != nil {
		t.Fatalf("a take tried again after it went through: %v", err)
	}
	if err := a.PutDesktop(d3); !errors.Is(err, desktop.ErrNotHere) {
		t.Fatalf("the source's write after the take: %v, want ErrNotHere", err)
	}
}

// A move goes to the host named, if it can take a running machine of
// this host's, or else to the live host with the most memory free that
// has room; never to this host or a draining one.
func TestMoveTargetIsALiveHostWithRoom(t *testing.T) {
	same := RestoreKey{QEMU: "7.2/abc", Machine: "pc-q35-7.2", Accel: "tcg"}
	other := RestoreKey{QEMU: "8.0/def", Machine: "pc-q35-8.0", Accel: "tcg"}
	hosts := []Host{
		{Name: "a", MemoryMiB: 8192, MaxDesktops: 8, Restore: same},
		{Name: "b", MemoryMiB: 8192, UsedMemoryMiB: 2048, Desktops: 2, MaxDesktops: 8, Restore: same},
		{Name: "c", MemoryMiB: 8192, MaxDesktops: 8, Restore: same, Draining: true},
		{Name: "d", MemoryMiB: 16384, MaxDesktops: 8, Restore: other},
		{Name: "e", MemoryMiB: 4096, Desktops: 1, MaxDesktops: 1, Restore: same},
	}
	for _, tt := range []struct {
		self, to string
		want     string
		err      error
	}{
		{"a", "", "b", nil},                 // a itself is left out; c drains, d restores otherwise, e is full
		{"b", "", "a", nil},                 // a has the most free
		{"a", "e", "e", nil},                // named: its room is its own to check (507 there)
		{"a", "a", "", desktop.ErrInvalid},  // itself
		{"a", "c", "", desktop.ErrConflict}, // draining
		{"a", "d", "", desktop.ErrConflict}, // another QEMU
		{"a", "zz", "", desktop.ErrNotFound},
	} {
		h, err := moveTarget(hosts, tt.self, same, tt.to, 1024)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("from %s to %q: %v, want %v", tt.self, tt.to, err, tt.err)
			}
			continue
		}
		if err != nil || h.Name != tt.want {
			t.Errorf("from %s to %q: %s, %v; want %s", tt.self, tt.to, h.Name, err, tt.want)
		}
	}
	full := []Host{{Name: "a", Restore: same}, {Name: "b", MemoryMiB: 1024, UsedMemoryMiB: 512, MaxDesktops: 8, Restore: same}}
	if _, err := moveTarget(full, "a", same, "", 1024); !errors.Is(err, desktop.ErrCapacity) {
		t.Errorf("no host with room: %v, want ErrCapacity", err)
	}
}
