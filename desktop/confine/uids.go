// Package confine keeps a machine's emulator process away from the host and
// from other machines: a user id of its own, taken from a configured range,
// and a cgroup of its own with memory, CPU and process limits. It knows
// nothing of QEMU; the drivers apply what it hands out.
package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// IDRange is a run of user ids (and the same group ids) reserved for
// machines: First, First+1, ... First+Count-1. No user or group of the
// host may own anything under those ids.
type IDRange struct {
	First uint32
	Count uint32
}

// DefaultIDRange is far above the ids distributions hand out to people
// (1000-59999), to system users (100-999) and to container user
// namespaces (commonly 100000-165535 and 0x70000000 up).
var DefaultIDRange = IDRange{First: 900_000_000, Count: 65_536}

// String is the range as FIRST-LAST, the form ParseIDRange reads.
func (r IDRange) String() string {
	return fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1)
}

// ParseIDRange reads "FIRST-LAST" (inclusive). Id 0 and the ids 65534 and
// 65535 (nobody, and the "no id" marker of 16-bit interfaces) are refused,
// as is any range that reaches 2^32-1 (the kernel's "no id").
func ParseIDRange(s string) (IDRange, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return IDRange{}, fmt.Errorf("id range %q: want FIRST-LAST, for example %s", s, DefaultIDRange)
	}
	first, err1 := strconv.ParseUint(lo, 10, 32)
	last, err2 := strconv.ParseUint(hi, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return IDRange{}, fmt.Errorf("id range %q: want two decimal ids FIRST-LAST: %w", s, err)
	}
	switch {
	case first == 0:
		return IDRange{}, fmt.Errorf("id range %q: id 0 is root; start the range above the host's own users", s)
	case last < first:
		return IDRange{}, fmt.Errorf("id range %q: the last id is below the first", s)
	case last >= 1<<32-1:
		return IDRange{}, fmt.Errorf("id range %q: %d is the kernel's \"no id\"; end the range below it", s, uint64(1<<32-1))
	case first <= 65535 && last >= 65534:
		return IDRange{}, fmt.Errorf("id range %q: it holds 65534 or 65535 (nobody, and the 16-bit \"no id\"); choose a range without them", s)
	}
	return IDRange{First: uint32(first), Count: uint32(last - first + 1)}, nil
}

// ErrNoIDs means every user id of the range is in use.
var ErrNoIDs = errors.New("every user id of the machines' range is in use")

// DefaultLeaseDir holds one lock file per id in use, for every process on
// the host that hands out ids (hostd serve, hostd snapshot bake, tests).
const DefaultLeaseDir = "/run/warmdesk-uids"

// IDs hands out the ids of a range, each to one machine at a time across
// every process on the host: an id is held by an exclusive flock on its
// file in the lease directory. The machine's process inherits the locked
// descriptor, so the id stays held while the process lives, whatever
// becomes of the hostd that started it.
type IDs struct {
	r    IDRange
	dir  string
	mu   sync.Mutex
	next uint32 // offset the next search starts at, so ids rotate
}

// NewIDs hands out the ids of r, the search starting at offset start, with
// leases in dir (made 0700 if missing).
func NewIDs(r IDRange, start uint32, dir string) (*IDs, error) {
	if r.Count == 0 {
		return nil, errors.New("an empty id range")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("user id leases: %w", err)
	}
	return &IDs{r: r, dir: dir, next: start % r.Count}, nil
}

// Lease is one id held.
type Lease struct {
	ID uint32
	f  *os.File
}

// File is the locked descriptor, for the machine's process to inherit.
func (l *Lease) File() *os.File { return l.f }

// Release lets go of this process's hold. The id is free once every
// process holding the descriptor has closed it or ended.
func (l *Lease) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// ErrIDHeld means the id asked for is held by another process.
var ErrIDHeld = errors.New("the user id is held by another process")

// Hold takes the lease on one id again: that of a machine found running
// after a restart of the process that started it, whose own process could
// not inherit the lease (libvirtd starts QEMU, not hostd).
func (a *IDs) Hold(id uint32) (*Lease, error) {
	if !a.Contains(id) {
		return nil, fmt.Errorf("user id %d is outside the machines' range %s", id, a.r)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok, err := a.lock(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrIDHeld, id)
	}
	return &Lease{ID: id, f: f}, nil
}

// lock tries the lease file of id without waiting.
func (a *IDs) lock(id uint32) (*os.File, bool, error) {
	f, err := os.OpenFile(filepath.Join(a.dir, strconv.FormatUint(uint64(id), 10)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("user id leases: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false, nil
	}
	return f, true, nil
}

// Take returns a lease on an id nobody on the host holds. Ids are handed
// out in turn rather than lowest first, so an id just released is the last
// to come back.
func (a *IDs) Take() (*Lease, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := uint32(0); i < a.r.Count; i++ {
		off := (a.next + i) % a.r.Count
		id := a.r.First + off
		f, ok, err := a.lock(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		a.next = (off + 1) % a.r.Count
		return &Lease{ID: id, f: f}, nil
	}
	return nil, fmt.Errorf("%w (%s): raise the range's size or run fewer machines", ErrNoIDs, a.r)
}

// Contains says whether id is in the range.
func (a *IDs) Contains(id uint32) bool {
	return id >= a.r.First && id-a.r.First < a.r.Count
}
