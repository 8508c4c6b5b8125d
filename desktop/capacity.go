// What the host admits: the caps, the free-space reserve, and the memory a
// create or a wake holds while it runs.

package desktop

import (
	"fmt"
	"time"
)

// Limits are the host-wide caps and the ranges of per-desktop values.
type Limits struct {
	MaxDesktops  int           // desktops holding resources (creating, running, paused)
	MaxMemoryMiB int           // sum of their guest memory
	MaxFork      int           // copies per fork call
	MaxTTL       time.Duration // longest TTL a desktop may ask for
	MaxDiskMiB   int           // largest per-desktop disk growth
	PoolSize     int           // machines restored ahead per snapshot, for drivers that pool
	// MinFreeMiB is the free space (Config.FreeSpace) below which creates,
	// forks, wakes and snapshots are refused: a disk filled by desktops
	// would leave the records store unable to write.
	MinFreeMiB int
}

// DefaultLimits are conservative caps for a small host.
func DefaultLimits() Limits {
	return Limits{MaxDesktops: 32, MaxMemoryMiB: 32 << 10, MaxFork: 10, MaxTTL: 7 * 24 * time.Hour, MaxDiskMiB: 64 << 10, PoolSize: 2, MinFreeMiB: 2048}
}

// checkSpace refuses an action that writes desktop or snapshot files when
// the state directory's disk is below the free-space reserve.
func (m *Manager) checkSpace(action string) error {
	if m.freeSpace == nil || m.limits.MinFreeMiB <= 0 {
		return nil
	}
	free, err := m.freeSpace()
	if err != nil {
		return fmt.Errorf("%s: free space: %w", action, err)
	}
	if free < uint64(m.limits.MinFreeMiB)<<20 {
		return fmt.Errorf("%w: %s: %d MiB are free on the state directory's disk, below the reserve of %d MiB; delete desktops or snapshots, or lower --min-free-mib", ErrNoSpace, action, free>>20, m.limits.MinFreeMiB)
	}
	return nil
}

// reserve claims room for n desktops of memMiB each under the host caps.
func (m *Manager) reserve(n, memMiB int) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	count, mem := m.pending, m.reserved
	for _, e := range m.desktops {
		d := e.snapshot()
		if d.State.Holds() {
			count++
			mem += d.Resources.MemoryMiB
		}
	}
	if count+n > m.limits.MaxDesktops {
		return nil, fmt.Errorf("%w: %d desktops hold resources and the host cap is %d; delete or hibernate some, or raise --max-desktops", ErrCapacity, count, m.limits.MaxDesktops)
	}
	if mem+n*memMiB > m.limits.MaxMemoryMiB {
		return nil, fmt.Errorf("%w: desktops hold %d MiB of guest memory, %d more would pass the host cap of %d MiB; delete or hibernate some, or raise --max-memory", ErrCapacity, mem, n*memMiB, m.limits.MaxMemoryMiB)
	}
	m.pending += n
	m.reserved += n * memMiB
	released := false
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !released {
			released = true
			m.pending -= n
			m.reserved -= n * memMiB
		}
	}, nil
}

// reserveComeback reserves room for a desktop that holds nothing now
// (hibernated, failed) and is about to run again, as a create would; one
// that holds its room already needs nothing more.
func (m *Manager) reserveComeback(d Desktop, action string) (release func(), err error) {
	if d.State.Holds() {
		return func() {}, nil
	}
	if err := m.checkSpace(action); err != nil {
		return nil, err
	}
	release, err = m.reserve(1, d.Resources.MemoryMiB)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, d.ID, err)
	}
	return release, nil
}
