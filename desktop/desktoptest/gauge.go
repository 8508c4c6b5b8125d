package desktoptest

import (
	"sync"
	"time"
)

// Gauge is a desktop.CPUGauge at the pressure a test sets. Every Next is
// a measurement already taken, so a queued admission reads the pressure
// again at once.
type Gauge struct {
	mu sync.Mutex
	p  float64
}

// NewGauge starts at pressure p.
func NewGauge(p float64) *Gauge { return &Gauge{p: p} }

// Set changes the pressure.
func (g *Gauge) Set(p float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.p = p
}

// Pressure is the pressure set.
func (g *Gauge) Pressure() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.p
}

// Next is closed already.
func (g *Gauge) Next() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Window is 10 s, as the host's meter's.
func (g *Gauge) Window() time.Duration { return 10 * time.Second }
