package desktop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeGauge is a CPUGauge whose pressure the test sets; measure wakes the
// waiters as a new sample would.
type fakeGauge struct {
	mu       sync.Mutex
	pressure float64
	next     chan struct{}
}

func newFakeGauge(p float64) *fakeGauge { return &fakeGauge{pressure: p, next: make(chan struct{})} }

func (g *fakeGauge) Pressure() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pressure
}

func (g *fakeGauge) Next() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

func (g *fakeGauge) Window() time.Duration { return 10 * time.Second }

func (g *fakeGauge) measure(p float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pressure = p
	close(g.next)
	g.next = make(chan struct{})
}

// waitQueued waits until n actions wait in a's queue.
func waitQueued(t *testing.T, a *CPUAdmission, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d, want %d", a.Status().Queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCPUAdmissionQueuesInOrderAndRefusesWhenItStaysBusy(t *testing.T) {
	g := newFakeGauge(0.2)
	a := &CPUAdmission{gauge: g, bound: 0.5, wait: time.Minute, max: 2}
	if err := a.admit(t.Context(), "create"); err != nil {
		t.Fatalf("under the bound: %v", err)
	}
	g.measure(0.95)
	order := make(chan string, 3)
	errs := make(chan error, 3)
	for _, name := range []string{"first", "second"} {
		go func() {
			err := a.admit(t.Context(), name)
			if err == nil {
				order <- name
			}
			errs <- err
		}()
		waitQueued(t, a, map[string]int{"first": 1, "second": 2}[name])
	}
	// A third finds the queue full: refused at once, with the pressure.
	err := a.admit(t.Context(), "third")
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || !be.Full || be.Pressure != 0.95 || be.RetryAfter != 5*time.Second {
		t.Fatalf("third with a full queue: %v (%+v)", err, be)
	}
	// Still busy at the next sample: nobody goes.
	g.measure(0.9)
	if s := a.Status(); s.Queued != 2 || s.Admitted != 0 {
		t.Fatalf("still busy: %+v", s)
	}
	// The pressure falls: one per sample, in arrival order.
	g.measure(0.1)
	if got := <-order; got != "first" {
		t.Fatalf("first admitted: %s", got)
	}
	waitQueued(t, a, 1)
	g.measure(0.1)
	if got := <-order; got != "second" {
		t.Fatalf("second admitted: %s", got)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := a.Status(); s.Admitted != 2 || s.Refused != 1 || s.Queued != 0 || s.Bound != 0.5 {
		t.Errorf("status %+v", s)
	}
}

func TestCPUAdmissionGivesUpAfterItsWait(t *testing.T) {
	g := newFakeGauge(0.99)
	a := &CPUAdmission{gauge: g, bound: 0.5, wait: 20 * time.Millisecond, max: 4}
	err := a.admit(t.Context(), "wake")
	var be *BusyError
	if !errors.As(err, &be) || be.Full || be.Waited < 20*time.Millisecond || be.Action != "wake" {
		t.Fatalf("err %v (%+v), want refused after the wait", err, be)
	}
	if s := a.Status(); s.Queued != 0 || s.Refused != 1 {
		t.Errorf("status %+v", s)
	}
	// A request that ends while waiting leaves the queue, unrefused.
	ctx, cancel := context.WithCancel(context.Background())
	a.wait = time.Minute
	done := make(chan error)
	go func() { done <- a.admit(ctx, "create") }()
	waitQueued(t, a, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if s := a.Status(); s.Queued != 0 || s.Refused != 1 {
		t.Errorf("status after a cancel %+v", s)
	}
}

func TestNoCPUAdmissionWithoutAGaugeOrBound(t *testing.T) {
	for _, a := range []*CPUAdmission{{bound: 0.5, max: 1}, {gauge: newFakeGauge(1), max: 1}} {
		if err := a.admit(t.Context(), "create"); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
	var none *CPUAdmission
	if p := none.Pressure(); p != 0 {
		t.Errorf("no admission's pressure = %v, want 0", p)
	}
	if p := NewCPUAdmission(newFakeGauge(0.7), DefaultLimits()).Pressure(); p != 0.7 {
		t.Errorf("pressure = %v, want the gauge's 0.7", p)
	}
}

// A pool refill waits while the pressure is over the bound and while
// creates wait, so it never goes before them.
func TestWaitIdleYieldsToBusyCPUsAndQueuedCreates(t *testing.T) {
	g := newFakeGauge(0.9)
	a := &CPUAdmission{gauge: g, bound: 0.5, wait: time.Minute, max: 4}
	created := make(chan error, 1)
	go func() { created <- a.admit(t.Context(), "create") }()
	waitQueued(t, a, 1)
	refilled := make(chan error, 1)
	go func() { refilled <- a.WaitIdle(t.Context()) }()
	g.measure(0.1) // the create goes at this sample; the refill sees it queued
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refilled:
		t.Fatalf("refill went with the create: %v", err)
	default:
	}
	g.measure(0.1)
	if err := <-refilled; err != nil {
		t.Fatal(err)
	}
	var none *CPUAdmission
	if err := none.WaitIdle(t.Context()); err != nil {
		t.Errorf("no admission: %v", err)
	}
}
