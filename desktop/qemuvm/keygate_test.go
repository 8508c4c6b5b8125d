package qemuvm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/desktop/qemuvm/qemuvmtest"
)

// What QEMU 7.2's HMP "info irq" printed for a q35 guest.
const infoIRQ = `IRQ statistics for ioapic:
 0: 1
 1: 57
 4: 12
IRQ statistics for isa-i8259:
 0: 1
 1: 57
 4: 12
`

func TestParseIRQStats(t *testing.T) {
	stats, err := qemuvm.ParseIRQStats(infoIRQ)
	if err != nil {
		t.Fatal(err)
	}
	if stats["isa-i8259"][1] != 57 || stats["ioapic"][4] != 12 || stats["isa-i8259"][9] != 0 {
		t.Fatalf("parsed %v", stats)
	}
	for _, bad := range []string{" 1: 5", "IRQ statistics for :\n", "IRQ statistics for x:\n 1 5", "IRQ statistics for x:\n a: 5", "IRQ statistics for x:\n 1: -5"} {
		if _, err := qemuvm.ParseIRQStats(bad); err == nil {
			t.Errorf("ParseIRQStats(%q) took a malformed answer", bad)
		}
	}
}

func FuzzParseIRQStats(f *testing.F) {
	f.Add(infoIRQ)
	f.Add("")
	f.Add("IRQ statistics for x:\n 1: 99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		stats, err := qemuvm.ParseIRQStats(s)
		if err != nil {
			return
		}
		for name, lines := range stats {
			if !strings.Contains(s, "IRQ statistics for "+name) {
				t.Fatalf("controller %q is not in %q", name, s)
			}
			for irq := range lines {
				if irq < 0 {
					t.Fatalf("line %d", irq)
				}
			}
		}
	})
}

func TestKeyboardBytes(t *testing.T) {
	key := func(k string, down bool) desktop.InputEvent {
		return desktop.InputEvent{Kind: desktop.InputKey, Key: k, Down: down}
	}
	for _, c := range []struct {
		events []desktop.InputEvent
		want   uint64
	}{
		{[]desktop.InputEvent{key("a", true), key("a", false)}, 2},
		{[]desktop.InputEvent{key("shift", true), key("a", true), key("a", false), key("shift", false)}, 4},
		{[]desktop.InputEvent{key("up", true), key("up", false)}, 4},
		{[]desktop.InputEvent{key("pause", true), key("pause", false)}, 2},
		{[]desktop.InputEvent{{Kind: desktop.InputMove, X: 1, Y: 1}, {Kind: desktop.InputButton, Button: "left", Down: true}}, 0},
	} {
		if got := qemuvm.KeyboardBytes(c.events); got != c.want {
			t.Errorf("KeyboardBytes(%v) = %d, want %d", c.events, got, c.want)
		}
	}
}

// guest is a keyboard controller whose interrupt count the test moves.
// Its run state is status; "" leaves query-status unanswered.
type guest struct {
	mu     sync.Mutex
	count  uint64
	fail   error
	status string
}

func (g *guest) monitor() *qemuvmtest.Monitor {
	mon := qemuvmtest.New()
	if g.status != "" {
		mon.Handle("query-status", func(json.RawMessage) (any, error) {
			return map[string]any{"status": g.status, "running": g.status == "running"}, nil
		})
	}
	mon.Handle("human-monitor-command", func(json.RawMessage) (any, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.fail != nil {
			return nil, g.fail
		}
		return fmt.Sprintf("IRQ statistics for isa-i8259:\n 0: 1\n 1: %d\n", g.count), nil
	})
	return mon
}

func (g *guest) read(n uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.count += n
}

var keyFrame = []desktop.InputEvent{{Kind: desktop.InputKey, Key: "a", Down: true}, {Kind: desktop.InputKey, Key: "a"}}

// A second keyboard frame waits until the guest has read every byte of the
// first; pointer frames never wait.
func TestKeyGateWaitsForTheGuest(t *testing.T) {
	g := &guest{count: 40}
	mon := g.monitor()
	gate := &qemuvm.KeyGate{MaxWait: time.Minute}
	ctx := context.Background()
	sent := make(chan int, 3)
	send := func(n int) func(context.Context) error {
		return func(context.Context) error { sent <- n; return nil }
	}
	if err := gate.Send(ctx, mon, keyFrame, send(1)); err != nil {
		t.Fatal(err)
	}
	if err := gate.Send(ctx, mon, []desktop.InputEvent{{Kind: desktop.InputMove, X: 1, Y: 1}}, send(2)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gate.Send(ctx, mon, keyFrame, send(3)) }()
	if <-sent != 1 || <-sent != 2 {
		t.Fatal("the first frames went out of order")
	}
	g.read(1) // the press: the release still queued
	select {
	case n := <-sent:
		t.Fatalf("frame %d went before the guest read the last one", n)
	case <-time.After(50 * time.Millisecond):
	}
	g.read(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := <-sent; n != 3 {
		t.Fatalf("sent %d, want the third frame", n)
	}
}

// A guest that reads slowly is waited for past MaxWait: the bound is on
// reading nothing, not on the whole hold.
func TestKeyGateWaitsForASlowGuest(t *testing.T) {
	g := &guest{count: 7}
	mon := g.monitor()
	const maxWait = 300 * time.Millisecond
	gate := &qemuvm.KeyGate{MaxWait: maxWait}
	ctx := context.Background()
	// Four bytes: the press and release of two keys.
	twoKeys := append(append([]desktop.InputEvent{}, keyFrame...), desktop.InputEvent{Kind: desktop.InputKey, Key: "b", Down: true}, desktop.InputEvent{Kind: desktop.InputKey, Key: "b"})
	if err := gate.Send(ctx, mon, twoKeys, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(maxWait / 3)
		defer tick.Stop()
		for range 4 {
			select {
			case <-stop:
				return
			case <-tick.C:
				g.read(1)
			}
		}
	}()
	var countAtSend uint64
	err := gate.Send(ctx, mon, keyFrame, func(context.Context) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		countAtSend = g.count
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if countAtSend != 11 {
		t.Fatalf("the second frame went with the guest's count at %d, want 11 (every byte of the first read)", countAtSend)
	}
}

// A running guest that reads nothing for longer than MaxWait is slow, not
// stopped: the next frame waits until it reads. One that reads nothing for
// Stall gets the frame refused, with an error that says so, not sent.
func TestKeyGateWaitsForARunningGuestThenRefuses(t *testing.T) {
	g := &guest{count: 3, status: "running"}
	mon := g.monitor()
	gate := &qemuvm.KeyGate{MaxWait: 20 * time.Millisecond, Stall: time.Minute}
	ctx := context.Background()
	nop := func(context.Context) error { return nil }
	if err := gate.Send(ctx, mon, keyFrame, nop); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- gate.Send(ctx, mon, keyFrame, func(context.Context) error { sent <- struct{}{}; return nil })
	}()
	select {
	case <-sent:
		t.Fatal("the frame went while a running guest had not read the last one")
	case <-time.After(10 * 20 * time.Millisecond): // ten times MaxWait
	}
	g.read(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-sent

	gate.Stall = 60 * time.Millisecond
	err := gate.Send(ctx, mon, keyFrame, func(context.Context) error {
		t.Error("a frame was sent to a guest that read nothing for Stall")
		return nil
	})
	if !errors.Is(err, desktop.ErrUnavailable) || !strings.Contains(err.Error(), "read no key") {
		t.Fatalf("a running guest that reads nothing: %v, want ErrUnavailable saying no key was read", err)
	}
}

// A guest that reads nothing (paused) holds a frame for MaxWait, no
// longer; a context that ends first is the caller's error; a machine whose
// counts cannot be read is not paced.
func TestKeyGateBounds(t *testing.T) {
	g := &guest{status: "paused"}
	mon := g.monitor()
	gate := &qemuvm.KeyGate{MaxWait: 20 * time.Millisecond}
	ctx := context.Background()
	nop := func(context.Context) error { return nil }
	if err := gate.Send(ctx, mon, keyFrame, nop); err != nil {
		t.Fatal(err)
	}
	if err := gate.Send(ctx, mon, keyFrame, nop); err != nil {
		t.Fatalf("after MaxWait: %v", err)
	}
	gate.MaxWait = time.Minute
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := gate.Send(short, mon, keyFrame, nop); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a context that ends while the guest reads nothing: %v", err)
	}
	g.mu.Lock()
	g.fail = errors.New("monitor gone")
	g.mu.Unlock()
	for range 3 {
		if err := gate.Send(ctx, mon, keyFrame, nop); err != nil {
			t.Fatalf("unreadable counts: %v", err)
		}
	}
}
