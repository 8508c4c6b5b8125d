package cpupressure

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// Defaults for a Meter: a sample a second, pressure over the last ten.
const (
	DefaultInterval = time.Second
	DefaultWindow   = 10 * time.Second
)

// Reader returns the cumulative time in which runnable work waited for a
// CPU; only its growth between two reads matters.
type Reader func() (time.Duration, error)

// Meter samples a Reader and reports the share of the last window's wall
// time in which work waited for a CPU (0 to 1). Run samples; Pressure and
// Next are safe from any goroutine.
type Meter struct {
	read     Reader
	interval time.Duration
	window   time.Duration
	source   string

	mu      sync.Mutex
	samples []sample // oldest first, spanning at most the window
	next    chan struct{}
	err     error
}

type sample struct {
	at      time.Time
	stalled time.Duration
}

// NewMeter measures through read, sampling every interval over window
// (DefaultInterval and DefaultWindow when zero). source names the reader
// for status lines.
func NewMeter(read Reader, source string, interval, window time.Duration) *Meter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if window < interval {
		window = max(DefaultWindow, interval)
	}
	return &Meter{read: read, interval: interval, window: window, source: source, next: make(chan struct{})}
}

// Host is a Meter of this host: the kernel's pressure stall information
// when it can be read, else an estimate from the load average.
func Host() *Meter {
	if data, err := os.ReadFile(PSIFile); err == nil {
		if _, err := ParsePSI(data); err == nil {
			return NewMeter(func() (time.Duration, error) {
				data, err := os.ReadFile(PSIFile)
				if err != nil {
					return 0, err
				}
				return ParsePSI(data)
			}, "psi", 0, 0)
		}
	}
	return NewMeter(loadReader(runtime.NumCPU()), "loadavg", 0, 0)
}

// loadReader turns the load average into a cumulative stall: each read
// adds the time since the last one times LoadShare.
func loadReader(cpus int) Reader {
	var (
		mu      sync.Mutex
		last    time.Time
		stalled time.Duration
	)
	return func() (time.Duration, error) {
		data, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			return 0, err
		}
		load, err := ParseLoadavg(data)
		if err != nil {
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if !last.IsZero() {
			stalled += time.Duration(float64(now.Sub(last)) * LoadShare(load, cpus))
		}
		last = now
		return stalled, nil
	}
}

// Run samples until ctx ends.
func (m *Meter) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	m.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Sample(now)
		}
	}
}

// Sample reads once, as Run does each interval, and wakes Next's waiters.
func (m *Meter) Sample(now time.Time) {
	stalled, err := m.read()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
	if err == nil {
		m.samples = append(m.samples, sample{at: now, stalled: stalled})
		// Keep the newest sample at least a window old, so the window is
		// always covered once it has passed.
		for len(m.samples) > 2 && now.Sub(m.samples[1].at) >= m.window {
			m.samples = m.samples[1:]
		}
	}
	close(m.next)
	m.next = make(chan struct{})
}

// Pressure is the share of wall time in which work waited for a CPU over
// the window (or as much of it as has been sampled), 0 to 1; 0 before two
// samples or while the reader fails.
func (m *Meter) Pressure() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil || len(m.samples) < 2 {
		return 0
	}
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	wall := last.at.Sub(first.at)
	if wall <= 0 {
		return 0
	}
	share := float64(last.stalled-first.stalled) / float64(wall)
	return min(max(share, 0), 1)
}

// Next is closed at the next sample.
func (m *Meter) Next() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// Window is how far back Pressure looks.
func (m *Meter) Window() time.Duration { return m.window }

// Source says what is measured: "psi" or "loadavg".
func (m *Meter) Source() string { return m.source }

// Err is the last read's failure, nil when it worked.
func (m *Meter) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return fmt.Errorf("cpu pressure (%s): %w", m.source, m.err)
	}
	return nil
}
