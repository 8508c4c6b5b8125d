// What the host admits: the caps, the free-space reserve, and the memory a
// create or a wake holds while it runs.

package desktop

import (
	"fmt"
	"sync"
	"syscall"
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
	// MaxCPUPressure is the host CPU pressure (Config.CPU, 0 to 1) at or
	// above which creates, forks and wakes wait in a queue of at most
	// MaxCPUQueue for at most CPUQueueWait, then are refused with ErrBusy;
	// 0: no admission by CPU.
	MaxCPUPressure float64
	MaxCPUQueue    int
	CPUQueueWait   time.Duration
}

// DefaultLimits are conservative caps for a small host.
func DefaultLimits() Limits {
	return Limits{MaxDesktops: 32, MaxMemoryMiB: 32 << 10, MaxFork: 10, MaxTTL: 7 * 24 * time.Hour, MaxDiskMiB: 64 << 10, PoolSize: 2, MinFreeMiB: 2048,
		MaxCPUPressure: 0.9, MaxCPUQueue: 32, CPUQueueWait: time.Minute}
}

// capacity admits creates, forks, wakes and resets under the host's caps
// and free-space reserve. Its mutex is taken before the Manager's (see the
// lock order in manager.go): a reservation counts the desktops holding
// resources through holding, which takes m.mu and each entry's lock.
type capacity struct {
	limits Limits
	// freeSpace is Config.FreeSpace.
	freeSpace func() (uint64, error)
	// holding counts the desktops that hold resources now, and their
	// guest memory.
	holding func() (count, memMiB int)

	mu          sync.Mutex
	pending     int // creates in flight
	reservedMiB int // memory MiB of creates in flight
}

// FreeSpaceOf reports the space an unprivileged writer may still use on
// the filesystem that holds dir, for Config.FreeSpace.
func FreeSpaceOf(dir string) func() (uint64, error) {
	return func() (uint64, error) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		return st.Bavail * uint64(st.Bsize), nil
	}
}

// checkSpace refuses an action that writes desktop or snapshot files when
// the state directory's disk is below the free-space reserve.
func (c *capacity) checkSpace(action string) error {
	if c.freeSpace == nil || c.limits.MinFreeMiB <= 0 {
		return nil
	}
	free, err := c.freeSpace()
	if err != nil {
		return fmt.Errorf("%s: free space: %w", action, err)
	}
	if free < uint64(c.limits.MinFreeMiB)<<20 {
		return fmt.Errorf("%w: %s: %d MiB are free on the state directory's disk, below the reserve of %d MiB; delete desktops or snapshots, or lower --min-free-mib", ErrNoSpace, action, free>>20, c.limits.MinFreeMiB)
	}
	return nil
}

// reserve claims room for n desktops of memMiB each under the host caps.
// c.mu is held across the count, so two reservations cannot both take the
// last room.
func (c *capacity) reserve(n, memMiB int) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	count, mem := c.holding()
	count += c.pending
	mem += c.reservedMiB
	if count+n > c.limits.MaxDesktops {
		return nil, fmt.Errorf("%w: %d desktops hold resources and the host cap is %d; delete or hibernate some, or raise --max-desktops", ErrCapacity, count, c.limits.MaxDesktops)
	}
	if mem+n*memMiB > c.limits.MaxMemoryMiB {
		return nil, fmt.Errorf("%w: desktops hold %d MiB of guest memory, %d more would pass the host cap of %d MiB; delete or hibernate some, or raise --max-memory", ErrCapacity, mem, n*memMiB, c.limits.MaxMemoryMiB)
	}
	c.pending += n
	c.reservedMiB += n * memMiB
	released := false
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !released {
			released = true
			c.pending -= n
			c.reservedMiB -= n * memMiB
		}
	}, nil
}

// reserveComeback reserves room for a desktop that holds nothing now
// (hibernated, failed) and is about to run again, as a create would; one
// that holds its room already needs nothing more.
func (c *capacity) reserveComeback(d Desktop, action string) (release func(), err error) {
	if d.State.Holds() {
		return func() {}, nil
	}
	if err := c.checkSpace(action); err != nil {
		return nil, err
	}
	release, err = c.reserve(1, d.Resources.MemoryMiB)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, d.ID, err)
	}
	return release, nil
}

// holding counts the desktops that hold resources and their guest memory,
// for capacity.
func (m *Manager) holding() (count, memMiB int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.desktops {
		count, memMiB = addHolding(e.snapshot(), count, memMiB)
	}
	return count, memMiB
}

// Holding counts the desktops of ds that hold resources (creating,
// running, paused) and their guest memory: what the host caps count.
func Holding(ds []Desktop) (count, memMiB int) {
	for _, d := range ds {
		count, memMiB = addHolding(d, count, memMiB)
	}
	return count, memMiB
}

// addHolding adds d to a count of the desktops holding resources.
func addHolding(d Desktop, count, memMiB int) (int, int) {
	if d.State.Holds() {
		return count + 1, memMiB + d.Resources.MemoryMiB
	}
	return count, memMiB
}
