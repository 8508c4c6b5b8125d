package screenshot

import (
	"context"
	"fmt"
	"time"
)

// DefaultQuiet is how long the screen must stay unchanged to count as
// settled when WaitSettled is given no quiet period: long enough to bridge
// the gaps between the frames of a typical redraw or animation step, short
// enough not to slow an agent down noticeably.
const DefaultQuiet = 300 * time.Millisecond

// PokeInterval is how often the waits poke the Source. QEMU's VNC server
// stretches its refresh interval while the screen is idle (up to seconds);
// a poke brings it back to 30 ms. Without pokes, a change made while we wait
// could reach the mirror only after the quiet period had "passed". 50 ms
// keeps the delay well inside DefaultQuiet.
const PokeInterval = 50 * time.Millisecond

// Settle is how a WaitSettled ended.
type Settle struct {
	// Settled is true when the screen stayed unchanged for the quiet
	// period, false when the timeout came first.
	Settled bool
	// Waited is how long the wait took.
	Waited time.Duration
	// Counter is the change counter at the end.
	Counter uint64
	// Changes is how far the counter moved during the wait.
	Changes uint64
}

// WaitSettled waits until src has not changed for quiet (DefaultQuiet when
// zero or less) or until timeout passes (no timeout when zero or less, only
// ctx), poking src every PokeInterval. The quiet period starts with the
// call: changes before it are not known. It fails only when ctx ends.
func WaitSettled(ctx context.Context, src Source, quiet, timeout time.Duration) (Settle, error) {
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	start := time.Now()
	first, changed := src.Changed()
	counter, lastChange := first, start
	src.Poke()

	quietTimer := time.NewTimer(quiet)
	defer quietTimer.Stop()
	deadline, stopDeadline := afterOrNever(timeout)
	defer stopDeadline()
	poke := time.NewTicker(PokeInterval)
	defer poke.Stop()

	result := func(settled bool) Settle {
		return Settle{Settled: settled, Waited: time.Since(start), Counter: counter, Changes: counter - first}
	}
	// refresh catches up with changes whose notification select has not
	// picked yet, and reports whether there were any.
	refresh := func() bool {
		now, ch := src.Changed()
		if now == counter {
			return false
		}
		counter, changed, lastChange = now, ch, time.Now()
		quietTimer.Reset(quiet)
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return result(false), fmt.Errorf("wait for the screen to settle: %w", ctx.Err())
		case <-changed:
			refresh()
		case <-quietTimer.C:
			if !refresh() {
				return result(true), nil
			}
		case <-deadline:
			// A deadline at the very end of the quiet period still counts.
			settled := !refresh() && time.Since(lastChange) >= quiet
			return result(settled), nil
		case <-poke.C:
			src.Poke()
		}
	}
}

// Change is how a WaitChanged ended.
type Change struct {
	// Changed is true when the counter passed the given one, false when the
	// timeout came first.
	Changed bool
	// Waited is how long the wait took.
	Waited time.Duration
	// Counter is the change counter at the end.
	Counter uint64
}

// WaitChanged waits until src's change counter is past after, or timeout
// passes (no timeout when zero or less, only ctx), poking src every
// PokeInterval. It returns at once when the counter is already past. It
// fails only when ctx ends.
func WaitChanged(ctx context.Context, src Source, after uint64, timeout time.Duration) (Change, error) {
	start := time.Now()
	counter, changed := src.Changed()
	if counter > after {
		return Change{Changed: true, Counter: counter}, nil
	}
	src.Poke()
	deadline, stopDeadline := afterOrNever(timeout)
	defer stopDeadline()
	poke := time.NewTicker(PokeInterval)
	defer poke.Stop()
	for {
		select {
		case <-ctx.Done():
			return Change{Waited: time.Since(start), Counter: counter}, fmt.Errorf("wait for the screen to change: %w", ctx.Err())
		case <-changed:
			if counter, changed = src.Changed(); counter > after {
				return Change{Changed: true, Waited: time.Since(start), Counter: counter}, nil
			}
		case <-deadline:
			counter, _ = src.Changed()
			return Change{Changed: counter > after, Waited: time.Since(start), Counter: counter}, nil
		case <-poke.C:
			src.Poke()
		}
	}
}

// afterOrNever returns a channel that fires after d, or never when d <= 0.
func afterOrNever(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
