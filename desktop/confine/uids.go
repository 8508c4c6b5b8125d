// Package confine keeps a machine's emulator process away from the host and
// from other machines: a user id of its own, taken from a configured range,
// and a cgroup of its own with memory, CPU and process limits. It knows
// nothing of QEMU; the drivers apply what it hands out.
package confine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// ErrNoIDs means every id of the range is held by a running machine.
var ErrNoIDs = errors.New("every user id of the machines' range is in use")

// IDs hands out the ids of a range, each to one machine at a time.
type IDs struct {
	r    IDRange
	mu   sync.Mutex
	held map[uint32]bool
	next uint32 // offset the next search starts at, so ids rotate
}

// NewIDs hands out the ids of r, the first from offset start in it.
func NewIDs(r IDRange, start uint32) *IDs {
	return &IDs{r: r, held: map[uint32]bool{}, next: start % max(r.Count, 1)}
}

// Take returns an id no other machine holds. Ids are handed out in turn
// rather than lowest-first, so an id just released (whose owner's files
// may still be going away) is the last to come back.
func (a *IDs) Take() (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := uint32(0); i < a.r.Count; i++ {
		off := (a.next + i) % a.r.Count
		id := a.r.First + off
		if !a.held[id] {
			a.held[id] = true
			a.next = (off + 1) % a.r.Count
			return id, nil
		}
	}
	return 0, fmt.Errorf("%w (%s): raise the range's size or run fewer machines", ErrNoIDs, a.r)
}

// Hold marks id as held by a machine found again after a restart. An id
// outside the range is refused: it was handed out under another
// configuration, and this one must not hand it out twice.
func (a *IDs) Hold(id uint32) error {
	if !a.Contains(id) {
		return fmt.Errorf("user id %d is outside the machines' range %s", id, a.r)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[id] {
		return fmt.Errorf("user id %d is already held by another machine", id)
	}
	a.held[id] = true
	return nil
}

// Release gives id back.
func (a *IDs) Release(id uint32) {
	a.mu.Lock()
	delete(a.held, id)
	a.mu.Unlock()
}

// Contains says whether id is in the range.
func (a *IDs) Contains(id uint32) bool {
	return id >= a.r.First && id-a.r.First < a.r.Count
}

// Held counts the ids in use.
func (a *IDs) Held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.held)
}
