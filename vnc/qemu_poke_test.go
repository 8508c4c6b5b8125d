package vnc

import (
	"image/color"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

// Poke must reset QEMU's refresh interval without the guest seeing a key.

func TestQEMUPokeIsInvisibleToTheGuest(t *testing.T) {
	// vnc_key_event_ext shows that QEMU received a poke; input_event_key*
	// would show a key reaching the guest's keyboard.
	vm := startQEMU(t, qemuOptions{boot: true, trace: []string{"vnc_key_event_ext", "input_event_key*"}})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)

	tick := time.NewTicker(15 * time.Millisecond) // past Poke's 10 ms rate limit
	for range 20 {
		<-tick.C
		m.Poke()
	}
	tick.Stop()
	vm.trace.waitCount(t, "vnc_key_event_ext", 10, 10*time.Second)
	if n, _ := vm.trace.count("input_event_key"); n != 0 {
		t.Fatalf("pokes reached the guest's keyboard:\n%s", vm.trace.String())
	}
	// The painter repaints once per scancode: still black means none.
	if img := mirrorMatches(t, vm, m, 30*time.Second); img.RGBAAt(0, 0) != (color.RGBA{0, 0, 0, 255}) {
		t.Fatalf("screen %v after pokes, want black", img.RGBAAt(0, 0))
	}

	// The control: a real key press shows in the same log and on screen.
	vm.sendKey(t, "a")
	vm.trace.waitCount(t, "input_event_key", 1, 10*time.Second)
	green := color.RGBA{0, 0xa8, 0, 255} // palette 2: press and release
	deadline := time.After(30 * time.Second)
	for {
		img := mirrorMatches(t, vm, m, 30*time.Second)
		c := img.RGBAAt(0, 0)
		if c == green {
			break
		}
		if c != (color.RGBA{0, 0, 0xa8, 255}) && c != (color.RGBA{0, 0, 0, 255}) {
			t.Fatalf("screen %v after one key press: the guest saw extra scancodes", c)
		}
		select {
		case <-deadline:
			t.Fatalf("screen %v, want %v after one key press", c, green)
		default:
		}
	}
}

// TestQEMUPokeLatencyAfterIdle measures, with a still screen idle for a
// while, the time from a guest change (a key through QMP, which QEMU's VNC
// refresh does not notice) to the mirror seeing it, without and with Poke.
// It asserts only that changes arrive; the numbers go to the log.
// VNC_POKE_TRIALS and VNC_POKE_IDLE (seconds) tune it.
func TestQEMUPokeLatencyAfterIdle(t *testing.T) {
	requireQEMU(t)
	trials := envInt("VNC_POKE_TRIALS", 1)
	idle := time.Duration(envInt("VNC_POKE_IDLE", 10)) * time.Second
	vm := startQEMU(t, qemuOptions{boot: true})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)

	var without, with []time.Duration
	down := true
	for range trials {
		for _, poke := range []bool{false, true} {
			<-time.After(idle) // the idle period is what is measured
			before, changed := m.Changed()
			vm.keyEvent(t, "a", down) // one scancode, one repaint
			down = !down
			start := time.Now()
			latency := waitFirstChange(t, m, before, changed, poke, start)
			if poke {
				with = append(with, latency)
			} else {
				without = append(without, latency)
			}
			t.Logf("idle %v, poke %v: change seen after %v", idle, poke, latency.Round(time.Millisecond))
		}
	}
	t.Logf("after %v idle: without Poke median %v max %v; with Poke median %v max %v",
		idle, median(without), maxOf(without), median(with), maxOf(with))
}

func waitFirstChange(t *testing.T, m *Mirror, before uint64, changed <-chan struct{}, poke bool, start time.Time) time.Duration {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var tick <-chan time.Time
	if poke {
		m.Poke()
		ticker := time.NewTicker(10 * time.Millisecond)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-changed:
			return time.Since(start)
		case <-tick:
			m.Poke()
		case <-deadline:
			n, _ := m.Changed()
			t.Fatalf("no change within 10s (counter %d, was %d)", n, before)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m.Round(time.Millisecond)
}
