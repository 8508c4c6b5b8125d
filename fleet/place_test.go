package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

func TestChoose(t *testing.T) {
	held := []HeldSnapshot{{Name: "minimal", MemoryMiB: 1024}}
	qemu := RestoreKey{QEMU: "7.2", Machine: "pc-q35-7.2", Accel: "tcg"}
	other := RestoreKey{QEMU: "8.2", Machine: "pc-q35-8.2", Accel: "tcg"}
	hosts := []Host{
		{Name: "a", MemoryMiB: 4096, MaxDesktops: 8, Snapshots: held, Restore: qemu},
		{Name: "b", MemoryMiB: 4096, MaxDesktops: 8, Snapshots: held, Restore: qemu},
		{Name: "c", MemoryMiB: 8192, MaxDesktops: 1, Restore: other}, // cannot restore it
	}
	h, mem, err := choose(hosts, nil, "minimal")
	if err != nil || h.Name != "a" || mem != 1024 {
		t.Fatalf("empty fleet: %s, %d, %v; want a (first name on a tie), 1024", h.Name, mem, err)
	}
	if h, _, _ := choose(hosts, map[string]load{"a": {desktops: 1, memoryMiB: 1024}}, "minimal"); h.Name != "b" {
		t.Fatalf("a holding a desktop: chose %s, want b (more free memory)", h.Name)
	}
	if h, _, _ := choose(hosts, map[string]load{"a": {desktops: 1, memoryMiB: 1024}, "b": {desktops: 2, memoryMiB: 3072}}, "minimal"); h.Name != "a" {
		t.Fatalf("b full of memory: chose %s, want a", h.Name)
	}
	full := map[string]load{"a": {desktops: 4, memoryMiB: 4096}, "b": {desktops: 1, memoryMiB: 3584}}
	if _, _, err := choose(hosts, full, "minimal"); !errors.Is(err, ErrNoRoom) || !errors.Is(err, desktop.ErrCapacity) {
		t.Fatalf("every holder full: %v, want ErrNoRoom (a capacity error)", err)
	}
	if _, _, err := choose(hosts, nil, "browser"); !errors.Is(err, desktop.ErrNotFound) {
		t.Fatalf("a snapshot nobody holds: %v, want not found", err)
	}
	// A host that can restore the snapshot but lacks its files is taken
	// when the holders are full, and passed over while they have room.
	puller := Host{Name: "d", MemoryMiB: 16384, MaxDesktops: 8, Restore: qemu}
	withPuller := append(slices.Clone(hosts), puller)
	if h, _, _ := choose(withPuller, nil, "minimal"); h.Name != "a" {
		t.Fatalf("holders with room: chose %s, want a (holding beats free memory)", h.Name)
	}
	if h, _, err := choose(withPuller, full, "minimal"); err != nil || h.Name != "d" {
		t.Fatalf("holders full: chose %s, %v; want d, which pulls the files", h.Name, err)
	}
	// A holder with machines ready in its warm pool beats one with more
	// free memory.
	warm := slices.Clone(hosts)
	warm[0].Snapshots = []HeldSnapshot{{Name: "minimal", MemoryMiB: 1024, Warm: 2}}
	if h, _, _ := choose(warm, map[string]load{"a": {desktops: 1, memoryMiB: 1024}}, "minimal"); h.Name != "a" {
		t.Fatalf("a warm, b with more free memory: chose %s, want a", h.Name)
	}
	// Creates placed on a and not yet made will take both its machines.
	if h, _, _ := choose(warm, map[string]load{"a": {desktops: 2, memoryMiB: 2048, pending: map[string]int{"minimal": 2}}}, "minimal"); h.Name != "b" {
		t.Fatalf("a's warm machines spoken for: chose %s, want b (more free memory)", h.Name)
	}
	capped := []Host{{Name: "a", MemoryMiB: 1 << 20, MaxDesktops: 2, Snapshots: held}}
	if _, _, err := choose(capped, map[string]load{"a": {desktops: 2, memoryMiB: 2048}}, "minimal"); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("at --max-desktops: %v, want ErrNoRoom", err)
	}
}

// Three hosts place desktops at once, each through its own client, until
// the fleet is full: no host ends past its caps, and every place the
// fleet has is taken.
func TestConcurrentPlacementsNeverOverbook(t *testing.T) {
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held := []HeldSnapshot{{Name: "minimal", MemoryMiB: 1024}}
	caps := map[string]Host{
		"a": {Name: "a", MemoryMiB: 3072, MaxDesktops: 10, Snapshots: held}, // 3 by memory
		"b": {Name: "b", MemoryMiB: 8192, MaxDesktops: 2, Snapshots: held},  // 2 by count
		"c": {Name: "c", MemoryMiB: 4096, MaxDesktops: 4, Snapshots: held},  // 4
	}
	const room = 9
	for _, h := range caps {
		if _, err := Join(ctx, tc.client(t, 0), prefix, h, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	placed := map[string]int{}
	refused := 0
	var wg sync.WaitGroup
	for _, placer := range []string{"a", "b", "c"} {
		c := tc.client(t, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				id := fmt.Sprintf("d-%s-%d", placer, i)
				p, err := Place(ctx, c, prefix, "minimal", id)
				if errors.Is(err, ErrNoRoom) {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				// The chosen host records the desktop, then the room's
				// reservation goes.
				rec := NewRecords(c, p.Host.Name, prefix)
				if err := rec.PutDesktop(desktop.Desktop{ID: id, State: desktop.StateRunning, Resources: desktop.Resources{MemoryMiB: 1024}}); err != nil {
					t.Error(err)
				}
				if err := p.Release(ctx); err != nil {
					t.Error(err)
				}
				mu.Lock()
				placed[p.Host.Name]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for name, n := range placed {
		h := caps[name]
		if n > h.MaxDesktops || n*1024 > h.MemoryMiB {
			t.Errorf("host %s got %d desktops, past its caps (%d desktops, %d MiB)", name, n, h.MaxDesktops, h.MemoryMiB)
		}
		total += n
	}
	if total != room || refused != 18-room {
		t.Errorf("placed %d (%v), refused %d; want the fleet's %d places taken and the other %d refused", total, placed, refused, room, 18-room)
	}
}

// A drained host takes no new desktop while others can; undrained, it
// takes them again.
func TestADrainedHostTakesNoDesktops(t *testing.T) {
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := tc.client(t, 0)
	held := []HeldSnapshot{{Name: "minimal", MemoryMiB: 1024}}
	for _, h := range []Host{{Name: "a", MemoryMiB: 8192, MaxDesktops: 8, Snapshots: held}, {Name: "b", MemoryMiB: 4096, MaxDesktops: 8, Snapshots: held}} {
		if _, err := Join(ctx, c, prefix, h, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	place := func() string {
		t.Helper()
		p, err := Place(ctx, c, prefix, "minimal", desktop.NewID("p-"))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		return p.Host.Name
	}
	if got := place(); got != "a" {
		t.Fatalf("placed on %s, want a (more free memory)", got)
	}
	if err := Drain(ctx, c, prefix, "a", true); err != nil {
		t.Fatal(err)
	}
	if got := place(); got != "b" {
		t.Fatalf("a drained: placed on %s, want b", got)
	}
	hs, err := Hosts(ctx, c, prefix)
	if err != nil || len(hs) != 2 || !hs[0].Draining || hs[1].Draining {
		t.Fatalf("hosts %+v, %v: want a draining, b not", hs, err)
	}
	if err := Drain(ctx, c, prefix, "a", false); err != nil {
		t.Fatal(err)
	}
	if got := place(); got != "a" {
		t.Fatalf("a undrained: placed on %s, want a", got)
	}
}

// A reservation lives as long as its create, past its lease's TTL, and
// goes with Release.
func TestAReservationLastsUntilReleased(t *testing.T) {
	defer func(ttl time.Duration) { reservationTTL = ttl }(reservationTTL)
	reservationTTL = 2 * time.Second
	tc := startCluster(t, 1, false)
	prefix := freshPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := tc.client(t, 0)
	if _, err := Join(ctx, c, prefix, Host{Name: "a", MemoryMiB: 4096, MaxDesktops: 4, Snapshots: []HeldSnapshot{{Name: "minimal", MemoryMiB: 1024}}}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := Place(ctx, c, prefix, "minimal", "d-long")
	if err != nil {
		t.Fatal(err)
	}
	reserved := func() bool {
		t.Helper()
		resp, err := c.Get(ctx, prefix+"reservations/a/d-long")
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs) == 1
	}
	// What is tested is a time bound: the reservation outlives twice its
	// lease's TTL, which it would not without the keep-alive.
	past := time.NewTimer(2 * reservationTTL)
	select {
	case <-past.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if !reserved() {
		t.Fatalf("the reservation ended after %s, before its create did", 2*reservationTTL)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if reserved() {
		t.Fatal("the reservation outlived its Release")
	}
}
