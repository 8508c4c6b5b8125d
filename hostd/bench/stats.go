// Package bench is hostd's benchmark harness: it measures create latency,
// screenshots, actions, memory density and forks on real desktops, beside
// the alternatives a user would pick instead (cold boot, full-state
// restore, libvirt), in one run on one machine.
package bench

import (
	"math"
	"sort"
	"time"
)

// Dist is a distribution of measured durations.
type Dist struct {
	Samples []time.Duration
}

// Add records one sample.
func (d *Dist) Add(v time.Duration) { d.Samples = append(d.Samples, v) }

// N is the number of samples.
func (d *Dist) N() int { return len(d.Samples) }

// Percentile returns the p-th percentile (0 < p <= 100) by the
// nearest-rank method: the smallest sample at or above p percent of them.
func (d *Dist) Percentile(p float64) time.Duration {
	if len(d.Samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d.Samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Max is the largest sample.
func (d *Dist) Max() time.Duration { return d.Percentile(100) }

// Min is the smallest sample.
func (d *Dist) Min() time.Duration {
	if len(d.Samples) == 0 {
		return 0
	}
	m := d.Samples[0]
	for _, v := range d.Samples {
		m = min(m, v)
	}
	return m
}

// ms converts a duration to milliseconds, to 100 ns (a cached screenshot
// takes well under a microsecond).
func ms(v time.Duration) float64 {
	return math.Round(float64(v)/float64(time.Millisecond)*10000) / 10000
}
