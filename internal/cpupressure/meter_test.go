package cpupressure

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// fakeStall is a cumulative stall the test advances.
type fakeStall struct {
	stalled time.Duration
	err     error
}

func (f *fakeStall) read() (time.Duration, error) { return f.stalled, f.err }

func TestMeterIsTheStalledShareOfTheWindow(t *testing.T) {
	src := &fakeStall{}
	m := NewMeter(src.read, "fake", time.Second, 4*time.Second)
	t0 := time.Unix(1000, 0)
	m.Sample(t0)
	if p := m.Pressure(); p != 0 {
		t.Fatalf("one sample: pressure %v, want 0", p)
	}
	// Half of each second stalled for 4 s, then fully stalled for 4 s:
	// the window then holds only the stalled seconds.
	for i := 1; i <= 8; i++ {
		if i <= 4 {
			src.stalled += 500 * time.Millisecond
		} else {
			src.stalled += time.Second
		}
		m.Sample(t0.Add(time.Duration(i) * time.Second))
		if i == 4 && math.Abs(m.Pressure()-0.5) > 1e-9 {
			t.Errorf("after 4 s half stalled: pressure %v, want 0.5", m.Pressure())
		}
	}
	if p := m.Pressure(); math.Abs(p-1) > 1e-9 {
		t.Errorf("after 4 s fully stalled: pressure %v, want 1", p)
	}
	// A failing read reports no pressure and says why.
	src.err = errors.New("gone")
	m.Sample(t0.Add(9 * time.Second))
	if m.Pressure() != 0 || m.Err() == nil {
		t.Errorf("failing reader: pressure %v, err %v", m.Pressure(), m.Err())
	}
}

func TestNextIsClosedAtTheNextSample(t *testing.T) {
	src := &fakeStall{}
	m := NewMeter(src.read, "fake", 10*time.Millisecond, 0)
	next := m.Next()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	select {
	case <-next:
	case <-time.After(10 * time.Second):
		t.Fatal("no sample within 10 s")
	}
	cancel()
	<-done
	if m.Window() < m.interval {
		t.Errorf("window %v shorter than the interval", m.Window())
	}
}

// The host's own meter reads something it can parse here.
func TestHostMeterReads(t *testing.T) {
	m := Host()
	if _, err := m.read(); err != nil {
		t.Fatalf("%s: %v", m.Source(), err)
	}
}
