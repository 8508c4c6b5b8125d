package qemuvm

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// The guest reads its PS/2 keyboard through a 16-byte queue in QEMU
// (about eight keystrokes of one byte a press and one a release), one byte
// an interrupt. A keyboard frame sent while earlier bytes still wait there
// can overflow it, and QEMU drops the keys without a word. On a quiet host
// the guest drains the queue well within a typing interval; on a busy one
// its vCPUs can be held off for tens of milliseconds or more: a wall-clock
// typing rate lost keys of every line typed into a guest held to 5% of a
// CPU. So a keyboard frame waits until the guest has read the one before
// it. The exact
// signal is the keyboard's interrupt line: the controller raises IRQ 1
// once for every byte it hands the guest, and hands the next only once
// the guest has read the last, and QEMU counts the raises (HMP "info
// irq"). A frame of n bytes has been taken, its last byte in the
// controller and nothing left in the queue, when the count has grown by n.

// KeyboardIRQ is the PC's keyboard interrupt line.
const KeyboardIRQ = 1

// KeyboardInterrupts reads how many times QEMU has raised the keyboard's
// interrupt line since the machine started (the i8259's count, which sees
// every ISA line whether the guest routes it through the IOAPIC or not).
func KeyboardInterrupts(ctx context.Context, ex Executor) (uint64, error) {
	out, err := humanMonitor(ctx, ex, "info irq")
	if err != nil {
		return 0, fmt.Errorf("read interrupt counts: %w", err)
	}
	stats, err := ParseIRQStats(out)
	if err != nil {
		return 0, err
	}
	pic, ok := stats["isa-i8259"]
	if !ok {
		return 0, fmt.Errorf("info irq has no isa-i8259 counts (a machine without a PC interrupt controller?): %.200q", out)
	}
	return pic[KeyboardIRQ], nil
}

// ParseIRQStats reads HMP "info irq": for each controller ("IRQ statistics
// for NAME:"), the count of each line that was ever raised (lines never
// raised are not listed, and read as 0).
func ParseIRQStats(s string) (map[string]map[int]uint64, error) {
	stats := map[string]map[int]uint64{}
	var cur map[int]uint64
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if name, ok := strings.CutPrefix(line, "IRQ statistics for "); ok {
			name = strings.TrimSuffix(name, ":")
			if name == "" {
				return nil, fmt.Errorf("info irq: a controller without a name: %q", line)
			}
			cur = map[int]uint64{}
			stats[name] = cur
			continue
		}
		irq, count, ok := strings.Cut(line, ":")
		n, err1 := strconv.Atoi(strings.TrimSpace(irq))
		c, err2 := strconv.ParseUint(strings.TrimSpace(count), 10, 64)
		if !ok || cur == nil || err1 != nil || err2 != nil || n < 0 {
			return nil, fmt.Errorf("info irq: line %q is not \"IRQ: count\" under a controller", line)
		}
		cur[n] = c
	}
	return stats, sc.Err()
}

// extendedKeys are the keys whose scancode set 1 bytes (what a Linux guest
// reads through the controller's translation) carry the E0 prefix: two
// bytes a press and two a release.
var extendedKeys = map[string]bool{
	"kp_enter": true, "ctrl_r": true, "kp_divide": true, "alt_r": true,
	"home": true, "up": true, "pgup": true, "left": true, "right": true,
	"end": true, "down": true, "pgdn": true, "insert": true, "delete": true,
	"meta_l": true, "meta_r": true, "menu": true, "compose": true,
	"power": true, "sleep": true, "wake": true,
	"audiomute": true, "calculator": true, "audioplay": true, "audiostop": true,
	"volumedown": true, "volumeup": true, "ac_home": true, "audionext": true,
	"audioprev": true, "mail": true, "mediaselect": true, "computer": true,
	"ac_search": true, "ac_bookmarks": true, "ac_refresh": true, "ac_stop": true,
	"ac_forward": true, "ac_back": true,
	// Print Screen is four bytes each way and Pause six on its press and
	// none on its release; two is what they have at least.
	"print": true, "sysrq": true,
}

// KeyboardBytes is how many bytes the guest reads from the keyboard
// controller for a frame's key events: at least that many, never more
// (keys this does not know count one byte, Pause's release none), so
// waiting for that many interrupts never waits for bytes that do not
// come.
func KeyboardBytes(events []desktop.InputEvent) uint64 {
	var n uint64
	for _, e := range events {
		switch {
		case e.Kind != desktop.InputKey:
		case e.Key == "pause":
			if e.Down {
				n += 2
			}
		case extendedKeys[e.Key]:
			n += 2
		default:
			n++
		}
	}
	return n
}

// KeyGate paces one machine's keyboard frames by its guest: Send holds a
// frame with keys until the keyboard controller has handed the guest every
// byte of the one before it. MaxWait bounds how long the guest may read
// nothing at all (a paused guest; its keys then go as they did before the
// gate); a guest that reads, however slowly, is waited for, since a bound
// on the whole hold overflowed the queue of a guest held to 5% of a CPU
// (a line lost 14 keys in CI). Poll is how often the count is read. The
// zero KeyGate is ready.
type KeyGate struct {
	MaxWait time.Duration
	Poll    time.Duration

	mu      sync.Mutex
	target  uint64 // the count at which the last key frame is taken
	pending bool
}

// Gate defaults.
const (
	DefaultKeyGateMaxWait = time.Second
	DefaultKeyGatePoll    = 2 * time.Millisecond
)

// Send sends one frame through send, first waiting for the guest behind
// ex to have read the previous keyboard frame when this one has keys.
func (g *KeyGate) Send(ctx context.Context, ex Executor, events []desktop.InputEvent, send func(context.Context) error) error {
	bytes := KeyboardBytes(events)
	if bytes == 0 {
		return send(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// The count that ended the wait for the last frame serves as this
	// one's start: counts only grow, so it is at most the count now.
	var before uint64
	known := false
	if g.pending {
		var err error
		if before, known, err = g.waitTaken(ctx, ex); err != nil {
			return err
		}
	}
	if !known {
		count, err := KeyboardInterrupts(ctx, ex)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// Without the count the gate cannot pace: the frame goes as
			// it would have without it.
			g.pending = false
			return send(ctx)
		}
		before = count
	}
	if err := send(ctx); err != nil {
		g.pending = false
		return err
	}
	g.target, g.pending = before+bytes, true
	return nil
}

// waitTaken waits until the count reaches the last frame's target, and
// returns the count that did (known false when the wait ended otherwise).
// Each byte the guest reads starts the MaxWait bound again.
func (g *KeyGate) waitTaken(ctx context.Context, ex Executor) (count uint64, known bool, err error) {
	g.pending = false
	maxWait, every := g.MaxWait, g.Poll
	if maxWait <= 0 {
		maxWait = DefaultKeyGateMaxWait
	}
	if every <= 0 {
		every = DefaultKeyGatePoll
	}
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last uint64
	for first := true; ; first = false {
		count, err := KeyboardInterrupts(ctx, ex)
		if ctx.Err() != nil {
			return 0, false, fmt.Errorf("wait for the guest to read the last keys: %w", ctx.Err())
		}
		if err != nil {
			return 0, false, nil
		}
		if count >= g.target {
			return count, true, nil
		}
		if !first && count > last {
			deadline.Reset(maxWait)
		}
		last = count
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("wait for the guest to read the last keys: %w", ctx.Err())
		case <-deadline.C:
			return 0, false, nil
		case <-tick.C:
		}
	}
}
