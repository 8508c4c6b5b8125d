// CPU admission: creates, forks and wakes wait while the host's CPUs are
// contended beyond a bound, in a bounded queue, in arrival order.

package desktop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// CPUGauge reports how contended the host's CPUs are (cpupressure.Meter).
type CPUGauge interface {
	// Pressure is the share of recent wall time in which runnable work
	// waited for a CPU, 0 to 1.
	Pressure() float64
	// Next is closed at the next measurement.
	Next() <-chan struct{}
	// Window is how far back Pressure looks.
	Window() time.Duration
}

// BusyError refuses an action the host's CPUs had no room for within the
// queue's wait: the answer is 503 with Retry-After.
type BusyError struct {
	Action     string
	Pressure   float64 // measured when refused
	Bound      float64
	Waited     time.Duration
	Queued     int // actions waiting, this one included
	RetryAfter time.Duration
	Full       bool // refused at once: the queue was full
}

func (e *BusyError) Error() string {
	why := fmt.Sprintf("waited %s in the admission queue", e.Waited.Round(time.Millisecond))
	if e.Full {
		why = fmt.Sprintf("the admission queue is full (%d waiting)", e.Queued)
	}
	return fmt.Sprintf("%s: %s: the host's CPU pressure is %.0f%%, above the bound of %.0f%%, and %s; retry after %s, or raise --max-cpu-pressure",
		ErrBusy, e.Action, 100*e.Pressure, 100*e.Bound, why, e.RetryAfter)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// RetryAfterSeconds is RetryAfter for a Retry-After header: whole
// seconds, at least 1.
func (e *BusyError) RetryAfterSeconds() int {
	return int(max(e.RetryAfter.Round(time.Second), time.Second) / time.Second)
}

// CPUStatus is the admission's state, for status pages and metrics.
type CPUStatus struct {
	Source   string        // how the gauge reads: psi, loadavg ("" for no gauge)
	Pressure float64       // now, 0 to 1
	Bound    float64       // 0: no admission by CPU
	Window   time.Duration // what Pressure covers
	Queued   int           // waiting now
	Admitted uint64        // after waiting
	Refused  uint64
}

// CPUAdmission holds creates, forks and wakes while the gauge's pressure
// is at or above Limits.MaxCPUPressure. Waiters go in arrival order, one
// per measurement, so a burst admitted at once cannot push the pressure
// back over before it is seen. A nil *CPUAdmission admits everything.
type CPUAdmission struct {
	gauge CPUGauge
	bound float64
	wait  time.Duration
	max   int

	mu    sync.Mutex
	queue []*int // tickets, oldest first
	// admittedAt is the gauge's Next when the last waiter went: the next
	// one waits for a newer measurement.
	admittedAt <-chan struct{}
	admitted   uint64
	refused    uint64
}

// NewCPUAdmission admits against g under l's MaxCPUPressure, MaxCPUQueue
// and CPUQueueWait (MaxCPUPressure 0: admits everything).
func NewCPUAdmission(g CPUGauge, l Limits) *CPUAdmission {
	return &CPUAdmission{gauge: g, bound: l.MaxCPUPressure, wait: l.CPUQueueWait, max: max(l.MaxCPUQueue, 1)}
}

// Run measures until ctx ends, when the gauge measures by itself
// (Manager.Run calls it).
func (a *CPUAdmission) Run(ctx context.Context) {
	if a == nil {
		return
	}
	if r, ok := a.gauge.(interface{ Run(context.Context) }); ok {
		r.Run(ctx)
	}
}

func (a *CPUAdmission) on() bool { return a != nil && a.gauge != nil && a.bound > 0 }

// admit returns when action may go, or a *BusyError when the pressure
// stayed over the bound for the queue's wait (or the queue was full), or
// ctx's error.
func (a *CPUAdmission) admit(ctx context.Context, action string) error {
	if !a.on() {
		return nil
	}
	a.mu.Lock()
	if len(a.queue) == 0 && a.gauge.Pressure() < a.bound {
		a.mu.Unlock()
		return nil
	}
	if len(a.queue) >= a.max {
		a.refused++
		err := a.busy(action, 0, len(a.queue), true)
		a.mu.Unlock()
		return err
	}
	ticket := new(int)
	a.queue = append(a.queue, ticket)
	a.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	for {
		// Next before the check: a measurement during the check is not missed.
		next := a.gauge.Next()
		a.mu.Lock()
		if a.queue[0] == ticket && next != a.admittedAt && a.gauge.Pressure() < a.bound {
			a.queue, a.admittedAt = a.queue[1:], next
			a.admitted++
			a.mu.Unlock()
			return nil
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			a.leave(ticket)
			return ctx.Err()
		case <-timer.C:
			a.mu.Lock()
			defer a.mu.Unlock()
			err := a.busy(action, time.Since(start), len(a.queue), false)
			a.queue = slices.DeleteFunc(a.queue, func(t *int) bool { return t == ticket })
			a.refused++
			return err
		case <-next:
		}
	}
}

// leave takes ticket out of the queue.
func (a *CPUAdmission) leave(ticket *int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queue = slices.DeleteFunc(a.queue, func(t *int) bool { return t == ticket })
}

// busy is the refusal; a.mu may be held.
func (a *CPUAdmission) busy(action string, waited time.Duration, queued int, full bool) error {
	return &BusyError{Action: action, Pressure: a.gauge.Pressure(), Bound: a.bound, Waited: waited, Queued: queued,
		RetryAfter: max(time.Second, a.gauge.Window()/2), Full: full}
}

// WaitIdle returns once the pressure is below the bound and no admission
// waits, or when ctx ends: for work that yields to every create, such as
// a warm pool's refills.
func (a *CPUAdmission) WaitIdle(ctx context.Context) error {
	for a.on() {
		next := a.gauge.Next()
		a.mu.Lock()
		idle := len(a.queue) == 0 && next != a.admittedAt && a.gauge.Pressure() < a.bound
		a.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		}
	}
	return ctx.Err()
}

// Pressure is the gauge's pressure now (0 without a gauge).
func (a *CPUAdmission) Pressure() float64 {
	if a == nil || a.gauge == nil {
		return 0
	}
	return a.gauge.Pressure()
}

// Status is the pressure, the bound and the queue now.
func (a *CPUAdmission) Status() CPUStatus {
	if a == nil || a.gauge == nil {
		return CPUStatus{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	source := "gauge"
	if s, ok := a.gauge.(interface{ Source() string }); ok {
		source = s.Source()
	}
	return CPUStatus{Source: source, Pressure: a.gauge.Pressure(), Bound: a.bound, Window: a.gauge.Window(), Queued: len(a.queue), Admitted: a.admitted, Refused: a.refused}
}
