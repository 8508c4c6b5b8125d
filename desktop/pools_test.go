package desktop_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// poolingFake records the pools a Manager asks for, as the QEMU driver
// would keep them.
type poolingFake struct {
	*desktoptest.Fake
	mu      sync.Mutex
	targets map[string]int
	changed chan struct{}
}

func (p *poolingFake) Warm(s desktop.Snapshot, n int) {
	p.mu.Lock()
	p.targets[s.Name] = n
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *poolingFake) PoolSize(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.targets[name]
}

func (p *poolingFake) WaitPool(ctx context.Context, name string, n int) error { return nil }

// waitTarget waits until the pool of name is asked to hold want machines.
func (p *poolingFake) waitTarget(t *testing.T, name string, want int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for p.PoolSize(name) != want {
		select {
		case <-p.changed:
		case <-deadline:
			t.Fatalf("pool of %s: %d machines asked for, want %d", name, p.PoolSize(name), want)
		}
	}
}

func TestSnapshotsBakedWhileServingGetAPool(t *testing.T) {
	fake, cat := fakeSetup(t)
	f := &poolingFake{Fake: fake, targets: map[string]int{}, changed: make(chan struct{}, 1)}
	lim := desktop.DefaultLimits()
	lim.PoolSize = 2
	m := desktop.NewManager(context.Background(), desktop.Config{Driver: f, Store: desktoptest.NewMemStore(), Catalog: cat, Limits: lim})
	defer m.Close()
	if err := m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.waitTarget(t, "golden", 2)

	// Another process (hostd snapshot bake) commits into the same
	// directory: a catalog of its own over it.
	other, err := desktop.NewCatalog(cat.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desktoptest.BakeFake(context.Background(), fake, other, "later"); err != nil {
		t.Fatal(err)
	}
	f.waitTarget(t, "later", 2)

	if err := other.Remove("later"); err != nil {
		t.Fatal(err)
	}
	f.waitTarget(t, "later", 0)
	if got := f.PoolSize("golden"); got != 2 {
		t.Fatalf("golden's pool: %d machines asked for after another snapshot went, want 2", got)
	}
}
