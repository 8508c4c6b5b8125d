package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// pool keeps machines restored ahead per snapshot, each a QEMU process
// with its own disk overlay whose guest runs from the snapshot's state and
// was readied by Options.Warmup, so a create only hands one over. It
// refills in the background, one machine at a time so it never starves
// running desktops of CPU, and never blocks a create: an empty pool means
// Restore spawns and restores directly.
type pool struct {
	d      *Driver
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	targets map[string]poolTarget
	ready   map[string][]*Machine
	// changed is closed and replaced whenever a machine joins the pool.
	changed chan struct{}
}

type poolTarget struct {
	snap desktop.Snapshot
	n    int
}

// poolMarker marks a run directory as a pool machine's; a pool machine that
// a previous hostd left behind is ended at start.
const poolMarker = "pooled.json"

// retryAfter spaces refills after a failed spawn (a full disk, a broken
// snapshot), so a persistent fault does not spin.
const retryAfter = 5 * time.Second

func newPool(d *Driver) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		d: d, ctx: ctx, cancel: cancel,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		targets: map[string]poolTarget{},
		ready:   map[string][]*Machine{},
		changed: make(chan struct{}),
	}
	go p.run()
	return p
}

// Warm keeps n machines restored from snapshot s ahead (0 stops).
func (d *Driver) Warm(s desktop.Snapshot, n int) {
	p := d.pool
	p.mu.Lock()
	var drop []*Machine
	if n <= 0 {
		delete(p.targets, s.Name)
	} else {
		p.targets[s.Name] = poolTarget{snap: s, n: n}
	}
	// Machines spawned for another bake under this name, or beyond n, go.
	var keep []*Machine
	for _, m := range p.ready[s.Name] {
		if !sameSnapshot(m, s) || len(keep) >= n {
			drop = append(drop, m)
		} else {
			keep = append(keep, m)
		}
	}
	p.ready[s.Name] = keep
	p.mu.Unlock()
	p.destroy(drop)
	p.signal()
}

// PoolSize reports how many machines are ready for a snapshot.
func (d *Driver) PoolSize(snapshot string) int {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return len(d.pool.ready[snapshot])
}

// WaitPool waits until n machines are ready for a snapshot.
func (d *Driver) WaitPool(ctx context.Context, snapshot string, n int) error {
	p := d.pool
	for {
		p.mu.Lock()
		have, changed := len(p.ready[snapshot]), p.changed
		p.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("warm pool of %s: %d of %d ready: %w", snapshot, have, n, ctx.Err())
		}
	}
}

// take hands out a ready machine for s, or nil.
// The refill is signalled by Restore once the restore is done, so a new
// spawn does not compete with it for the CPU.
func (p *pool) take(s desktop.Snapshot) *Machine {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.ready[s.Name]
	for len(list) > 0 {
		m := list[0]
		list = list[1:]
		select {
		case <-m.Exited():
			continue // died while waiting; its files go with the next refill
		default:
		}
		if !sameSnapshot(m, s) {
			go m.Destroy(context.Background())
			continue
		}
		p.ready[s.Name] = list
		os.Remove(filepath.Join(m.rec.RunDir, poolMarker))
		if err := m.jail.setCPUWeight(qemuvm.CPUWeight(m.rec.Shape.CPUs)); err != nil {
			p.d.log.Warn("warm pool: give a machine taken its CPU share", "err", err)
		}
		return m
	}
	p.ready[s.Name] = list
	return nil
}

// sameSnapshot tells whether m was spawned for this very bake of s (a
// snapshot removed and baked again under the same name has other files).
func sameSnapshot(m *Machine, s desktop.Snapshot) bool {
	return m.rec.Snapshot == s.Name && m.rec.Shape.QEMUSHA256 == s.Manifest.Machine.QEMUSHA256 &&
		m.poolKey == poolKey(s)
}

func poolKey(s desktop.Snapshot) string {
	return s.Manifest.Files[desktop.FileState].SHA256 + s.Manifest.CreatedAt.String()
}

func (p *pool) signal() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *pool) run() {
	defer close(p.done)
	var retry <-chan time.Time
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-retry:
			retry = nil
		}
		for p.ctx.Err() == nil {
			s, ok := p.needed()
			if !ok {
				break
			}
			if wait := p.d.opts.RefillWait; wait != nil && wait(p.ctx) != nil {
				break
			}
			m, err := p.d.spawnClone(p.ctx, desktop.NewID("pool-"), s, nil)
			if err != nil {
				p.d.log.Warn("warm pool: spawn failed", "snapshot", s.Name, "err", err)
				retry = time.After(retryAfter)
				break
			}
			m.poolKey = poolKey(s)
			if err := m.jail.setCPUWeight(backgroundCPUWeight); err != nil {
				p.d.log.Warn("warm pool: lower a pool machine's CPU share", "err", err)
			}
			marker, _ := json.Marshal(m.rec)
			os.WriteFile(filepath.Join(m.rec.RunDir, poolMarker), marker, 0o600)
			if err := p.prepare(m, s); err != nil {
				p.d.log.Warn("warm pool: restore failed", "snapshot", s.Name, "err", err)
				m.Destroy(context.Background())
				retry = time.After(retryAfter)
				break
			}
			p.mu.Lock()
			t, still := p.targets[s.Name]
			if still && poolKey(t.snap) == m.poolKey && len(p.ready[s.Name]) < t.n {
				p.ready[s.Name] = append(p.ready[s.Name], m)
				m = nil
				close(p.changed)
				p.changed = make(chan struct{})
			}
			p.mu.Unlock()
			if m != nil {
				m.Destroy(context.Background())
			}
		}
	}
}

// warmupTimeout bounds Options.Warmup on one machine.
const warmupTimeout = time.Minute

// prepare restores a pool machine from s and warms it up. Only the restore
// must succeed: a machine whose warm-up failed serves like one from a
// cold pool.
func (p *pool) prepare(m *Machine, s desktop.Snapshot) error {
	start := time.Now()
	if err := m.restore(p.ctx, s.Path(desktop.FileState), true, false); err != nil {
		return err
	}
	m.restored = true
	restored := time.Since(start)
	if p.d.opts.Warmup == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, warmupTimeout)
	defer cancel()
	if err := p.d.opts.Warmup(ctx, m, s); err != nil && p.ctx.Err() == nil {
		p.d.log.Warn("warm pool: part of a machine's warm-up failed; it serves without that part", "snapshot", s.Name, "err", err)
	}
	p.d.log.Debug("warm pool: machine ready", "snapshot", s.Name, "restore", restored, "warmup", time.Since(start)-restored)
	return nil
}

// needed returns a snapshot whose pool is short, dropping dead machines.
func (p *pool) needed() (desktop.Snapshot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, t := range p.targets {
		alive := p.ready[name][:0]
		for _, m := range p.ready[name] {
			select {
			case <-m.Exited():
				go m.rec.Remove()
			default:
				alive = append(alive, m)
			}
		}
		p.ready[name] = alive
		if len(alive) < t.n {
			return t.snap, true
		}
	}
	return desktop.Snapshot{}, false
}

func (p *pool) destroy(ms []*Machine) {
	for _, m := range ms {
		m.Destroy(context.Background())
	}
}

// close stops refilling and ends every pooled machine.
func (p *pool) close() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	var all []*Machine
	for name, list := range p.ready {
		all = append(all, list...)
		delete(p.ready, name)
	}
	p.mu.Unlock()
	p.destroy(all)
}

// cleanPoolLeftovers ends pool machines a previous hostd left behind: no
// desktop owns them.
func (d *Driver) cleanPoolLeftovers(ctx context.Context) {
	entries, err := os.ReadDir(d.opts.RunDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "pool-") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d.opts.RunDir, e.Name(), poolMarker))
		if err != nil {
			continue // handed to a desktop: the Manager owns it
		}
		if err := d.Cleanup(ctx, data); err != nil {
			d.log.Warn("remove leftover pool machine", "dir", e.Name(), "err", err)
		}
	}
}
