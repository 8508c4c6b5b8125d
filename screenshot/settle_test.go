package screenshot_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

var _ screenshot.Source = (*screenshottest.Source)(nil)

func newSource() *screenshottest.Source {
	return screenshottest.NewSource(screenshottest.DesktopFrame(64, 48, 1))
}

// changeEvery touches src every period, n times, from a goroutine that
// ends with the test.
func changeEvery(t *testing.T, src *screenshottest.Source, period time.Duration, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for range n {
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
				src.Touch()
			}
		}
	}()
}

func TestWaitSettled(t *testing.T) {
	tests := []struct {
		name        string
		period      time.Duration // between changes
		changes     int
		quiet       time.Duration
		timeout     time.Duration
		wantSettled bool
		wantWaited  time.Duration
		wantChanges uint64
	}{
		{"quiet screen settles after the quiet period", 0, 0, 300 * time.Millisecond, 5 * time.Second, true, 300 * time.Millisecond, 0},
		{"zero quiet means the default", 0, 0, 0, 5 * time.Second, true, screenshot.DefaultQuiet, 0},
		{"settles a quiet period after the last change", 100 * time.Millisecond, 10, 300 * time.Millisecond, 5 * time.Second, true, 1300 * time.Millisecond, 10},
		{"changes slower than the quiet period", 400 * time.Millisecond, 5, 300 * time.Millisecond, 5 * time.Second, true, 300 * time.Millisecond, 0},
		{"a busy screen runs into the timeout", 100 * time.Millisecond, 1000, 300 * time.Millisecond, 2050 * time.Millisecond, false, 2050 * time.Millisecond, 20},
		{"a timeout equal to the quiet period still settles", 0, 0, 300 * time.Millisecond, 300 * time.Millisecond, true, 300 * time.Millisecond, 0},
		{"no timeout", 50 * time.Millisecond, 100, 300 * time.Millisecond, 0, true, 5300 * time.Millisecond, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := newSource()
				changeEvery(t, src, tt.period, tt.changes)
				got, err := screenshot.WaitSettled(t.Context(), src, tt.quiet, tt.timeout)
				if err != nil {
					t.Fatal(err)
				}
				if got.Settled != tt.wantSettled || got.Waited != tt.wantWaited || got.Changes != tt.wantChanges {
					t.Errorf("WaitSettled = %+v, want settled=%v waited=%v changes=%d", got, tt.wantSettled, tt.wantWaited, tt.wantChanges)
				}
				if got.Counter != src.Counter() {
					t.Errorf("Counter = %d, source is at %d", got.Counter, src.Counter())
				}
				// One poke at the start, then one every PokeInterval.
				if want := 1 + int(got.Waited/screenshot.PokeInterval); src.Pokes() < want-1 || src.Pokes() > want {
					t.Errorf("poked %d times in %v, want about %d", src.Pokes(), got.Waited, want)
				}
			})
		})
	}
}

func TestWaitSettledStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		changeEvery(t, src, 10*time.Millisecond, 1000)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		got, err := screenshot.WaitSettled(ctx, src, 300*time.Millisecond, 0)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
		if got.Settled || got.Waited != time.Second {
			t.Errorf("WaitSettled = %+v, want unsettled after 1s", got)
		}
	})
}

// A server that only notices changes when asked: pokes are what makes the
// change visible, so the wait must keep poking.
func TestWaitsPokeAnIdleServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		pokes := 0
		src.OnPoke(func() {
			if pokes++; pokes == 4 {
				go src.Touch()
			}
		})
		got, err := screenshot.WaitChanged(t.Context(), src, src.Counter(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Changed || got.Waited != 3*screenshot.PokeInterval {
			t.Errorf("WaitChanged = %+v, want a change seen at the fourth poke, %v", got, 3*screenshot.PokeInterval)
		}
	})
}

func TestWaitChanged(t *testing.T) {
	t.Run("already changed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource()
			before := src.Counter()
			src.Touch()
			got, err := screenshot.WaitChanged(t.Context(), src, before, time.Second)
			if err != nil || !got.Changed || got.Waited != 0 || got.Counter != before+1 {
				t.Errorf("WaitChanged = %+v, %v; want an immediate change to %d", got, err, before+1)
			}
		})
	})
	t.Run("change comes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource()
			changeEvery(t, src, 700*time.Millisecond, 1)
			got, err := screenshot.WaitChanged(t.Context(), src, src.Counter(), time.Second)
			if err != nil || !got.Changed || got.Waited != 700*time.Millisecond {
				t.Errorf("WaitChanged = %+v, %v; want a change after 700ms", got, err)
			}
		})
	})
	t.Run("waits past a counter from ahead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource()
			changeEvery(t, src, 100*time.Millisecond, 5)
			got, err := screenshot.WaitChanged(t.Context(), src, src.Counter()+2, time.Second)
			if err != nil || !got.Changed || got.Waited != 300*time.Millisecond {
				t.Errorf("WaitChanged = %+v, %v; want the third change, after 300ms", got, err)
			}
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource()
			got, err := screenshot.WaitChanged(t.Context(), src, src.Counter(), 2*time.Second)
			if err != nil || got.Changed || got.Waited != 2*time.Second {
				t.Errorf("WaitChanged = %+v, %v; want no change after 2s", got, err)
			}
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource()
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				time.Sleep(time.Second)
				cancel()
			}()
			_, err := screenshot.WaitChanged(ctx, src, src.Counter(), 0)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		})
	})
}
