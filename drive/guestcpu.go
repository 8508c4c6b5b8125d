package drive

import (
	"context"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// idleShare is the most a guest's virtual CPUs may be busy, as a share of
// one CPU over a window, for the guest to count as idle. Measured on the
// browser image under TCG: an idle desktop's vCPUs run or wait 0 to 20 ms
// in most 100 ms windows (Chromium's timers); one acting on a click (openbox
// drawing a menu, Chromium moving its focus) is busy most of each window.
const idleShare = 0.25

// idleWindow is the shortest window over which the guest's idleness is
// judged: shorter ones mistake the gap between two frames for the end.
const idleWindow = 100 * time.Millisecond

// cpuMeter tells whether a guest has been idle since a mark: the screen
// going quiet says nothing more is being drawn, not that nothing more will
// be (openbox busy right after a restore draws a menu 1 s after the click).
type cpuMeter struct {
	read func() (time.Duration, error)
	at   time.Time
	busy time.Duration
	ok   bool
}

// newCPUMeter marks now. A meter whose reads fail counts the guest as
// idle whenever asked, so the waits fall back to the screen alone.
func newCPUMeter(read func() (time.Duration, error)) *cpuMeter {
	c := &cpuMeter{read: read}
	c.mark()
	return c
}

// mark starts a new window.
func (c *cpuMeter) mark() {
	if c == nil {
		return
	}
	var err error
	c.busy, err = c.read()
	c.ok = err == nil
	c.at = time.Now()
}

// idle says whether the guest was busy less than idleShare of the time
// since the mark.
func (c *cpuMeter) idle() bool {
	if c == nil || !c.ok {
		return true
	}
	busy, err := c.read()
	if err != nil {
		return true
	}
	return float64(busy-c.busy) < idleShare*float64(time.Since(c.at))
}

// waitIdle waits, at most bound (or one window, if longer), for a window
// of idleWindow in which the guest was idle, and says whether it saw one.
// Windows are timed by the clock: this waits for the guest, not for a
// fixed time.
func (c *cpuMeter) waitIdle(ctx context.Context, bound time.Duration) (bool, error) {
	if c == nil || !c.ok {
		return true, nil
	}
	c.mark()
	deadline := c.at.Add(max(bound, idleWindow))
	for {
		next := c.at.Add(idleWindow)
		if next.After(deadline) {
			return false, nil
		}
		if err := sleepUntil(ctx, next); err != nil {
			return false, err
		}
		if c.idle() {
			return true, nil
		}
		c.mark()
	}
}

// cpuMeter measures the desktop's guest from now; nil (the guest counted
// idle) when its machine cannot be had.
func (s *Service) cpuMeter(ctx context.Context, id string) *cpuMeter {
	mach, _, err := s.mgr.Machine(ctx, id, desktop.WaitNone)
	if err != nil {
		return nil
	}
	return newCPUMeter(mach.VCPUTime)
}
