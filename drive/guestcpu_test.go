package drive

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeCPU is a guest whose vCPUs are busy share of the wall time from
// start, for busyFor (0: for ever), and idle after.
type fakeCPU struct {
	share   float64
	start   time.Time
	busyFor time.Duration
	fail    bool
}

func (f *fakeCPU) read() (time.Duration, error) {
	if f.fail {
		return 0, errors.New("no such process")
	}
	ran := time.Since(f.start)
	if f.busyFor > 0 {
		ran = min(ran, f.busyFor)
	}
	return time.Duration(f.share * float64(ran)), nil
}

func TestCPUMeterTellsBusyFromIdle(t *testing.T) {
	busy := &fakeCPU{share: 1.5, start: time.Now()}
	idle := &fakeCPU{share: 0.05, start: time.Now()}
	ctx := context.Background()
	if ok, err := newCPUMeter(busy.read).waitIdle(ctx, 350*time.Millisecond); ok || err != nil {
		t.Fatalf("a busy guest was seen idle: %v %v", ok, err)
	}
	if ok, err := newCPUMeter(idle.read).waitIdle(ctx, 350*time.Millisecond); !ok || err != nil {
		t.Fatalf("an idle guest was not seen idle: %v %v", ok, err)
	}
	// A guest that goes idle partway through is seen idle then.
	late := &fakeCPU{share: 2, start: time.Now(), busyFor: 250 * time.Millisecond}
	if ok, _ := newCPUMeter(late.read).waitIdle(ctx, 200*time.Millisecond); ok {
		t.Fatal("a guest busy for 250 ms was seen idle within 200 ms")
	}
	if ok, err := newCPUMeter(late.read).waitIdle(ctx, time.Second); !ok || err != nil {
		t.Fatalf("a guest that went idle was not seen idle: %v %v", ok, err)
	}
}

// Without a reading the meter stands aside: the waits use the screen alone.
func TestCPUMeterWithoutReadingsCountsIdle(t *testing.T) {
	var nilMeter *cpuMeter
	if !nilMeter.idle() {
		t.Fatal("a nil meter said busy")
	}
	c := newCPUMeter((&fakeCPU{fail: true}).read)
	if !c.idle() {
		t.Fatal("a meter that cannot read said busy")
	}
	if ok, _ := c.waitIdle(context.Background(), time.Second); !ok {
		t.Fatal("a meter that cannot read waited")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newCPUMeter((&fakeCPU{share: 1, start: time.Now()}).read).waitIdle(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v", err)
	}
}
