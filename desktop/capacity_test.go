package desktop_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// 50 forks at once, while creates and deletes come and go, against caps
// they keep hitting: the reservations (capacity's mutex, then the
// Manager's) never deadlock with the desktops' op locks, the caps hold,
// and once all is done nothing stays reserved.
func TestForksUnderTheCapsLeaveNothingReserved(t *testing.T) {
	f, cat := fakeSetup(t)
	f.RestoreDelay = time.Millisecond
	limits := desktop.DefaultLimits()
	limits.MaxDesktops = 12
	m := desktop.NewManager(context.Background(), desktop.Config{Driver: f, Store: desktoptest.NewMemStore(), Catalog: cat, Limits: limits})
	ctx := context.Background()
	var sources []string
	for range 4 {
		d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "golden"})
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, d.ID)
	}
	var refused atomic.Int32
	count := func(err error) {
		if errors.Is(err, desktop.ErrCapacity) {
			refused.Add(1)
		}
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copies, err := m.Lineage().Fork(ctx, sources[i%len(sources)], 1+i%3)
			count(err)
			for _, c := range copies {
				m.Delete(ctx, c.ID)
			}
		}()
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for range 10 {
				d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "golden"})
				count(err)
				if err == nil && r.IntN(2) == 0 {
					m.Delete(ctx, d.ID)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("forks, creates and deletes still running after a minute: a lock-order deadlock?")
	}
	if refused.Load() == 0 {
		t.Error("no call was refused at the caps: the test did not reach them")
	}
	if pending, mem := desktop.InFlightForTest(m); pending != 0 || mem != 0 {
		t.Errorf("after all calls returned: %d creates and %d MiB still reserved, want none", pending, mem)
	}
	holding := 0
	for _, d := range m.List() {
		if d.State.Holds() {
			holding++
		}
	}
	if holding > limits.MaxDesktops {
		t.Errorf("%d desktops hold resources, past the cap of %d", holding, limits.MaxDesktops)
	}
	for _, d := range m.List() {
		if err := m.Delete(ctx, d.ID); err != nil {
			t.Errorf("final delete %s: %v", d.ID, err)
		}
	}
	if f.Live() != 0 {
		t.Errorf("%d machines left after deleting everything", f.Live())
	}
	if snaps, _, _ := cat.List(); len(snaps) != 1 {
		t.Errorf("%d snapshots left, want only golden: fork templates not collected", len(snaps))
	}
}
