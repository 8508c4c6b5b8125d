package qemuvm

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
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
// byte of the one before it. A guest that reads, however slowly, is waited
// for, since a bound on the whole hold overflowed the queue of a guest
// held to 5% of a CPU (a line lost 14 keys in CI). After MaxWait with
// nothing read the gate asks QEMU whether the guest runs: a stopped one
// (paused, or a machine whose state cannot be read) reads nothing until it
// runs again, and its keys then go as they did before the gate; a running
// one is only slow (the same starved guest went over a second without
// reading a byte), and is waited for until Stall has passed with nothing
// read, when the frame is refused with an error that says so rather than
// lost. Poll is how often the count is read. The zero KeyGate is ready.
type KeyGate struct {
	MaxWait time.Duration
	Stall   time.Duration
	Poll    time.Duration
	// Log, when set, hears of every frame that goes unpaced and why. (A
	// starved guest that lost a run of keys in CI had every frame paced:
	// those keys were lost above the controller, where the guest's kernel
	// queues events for X; the image's session script sees to that side.)
	Log *slog.Logger

	mu        sync.Mutex
	target    uint64 // the count at which the last key frame is taken
	lastBytes uint64 // that frame's bytes
	pending   bool
}

// Gate defaults.
const (
	DefaultKeyGateMaxWait = time.Second
	DefaultKeyGateStall   = 30 * time.Second
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
			g.unpaced("the keyboard's interrupt count is unreadable", "err", err)
			g.pending = false
			return send(ctx)
		}
		before = count
	}
	if err := send(ctx); err != nil {
		g.pending = false
		return err
	}
	g.target, g.pending, g.lastBytes = before+bytes, true, bytes
	return nil
}

// unpaced logs that a frame goes without waiting for the guest.
func (g *KeyGate) unpaced(why string, args ...any) {
	if g.Log != nil {
		g.Log.Warn("keyboard frame sent unpaced: "+why, args...)
	}
}

// waitTaken waits until the count reaches the last frame's target, and
// returns the count that did (known false when the wait ended otherwise).
// Each byte the guest reads starts the MaxWait and Stall bounds again.
func (g *KeyGate) waitTaken(ctx context.Context, ex Executor) (count uint64, known bool, err error) {
	g.pending = false
	maxWait, stall, every := g.MaxWait, g.Stall, g.Poll
	if maxWait <= 0 {
		maxWait = DefaultKeyGateMaxWait
	}
	if stall <= 0 {
		stall = DefaultKeyGateStall
	}
	if every <= 0 {
		every = DefaultKeyGatePoll
	}
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last uint64
	progress := time.Now()
	for first := true; ; first = false {
		count, err := KeyboardInterrupts(ctx, ex)
		if ctx.Err() != nil {
			return 0, false, fmt.Errorf("wait for the guest to read the last keys: %w", ctx.Err())
		}
		if err != nil {
			g.unpaced("the keyboard's interrupt count is unreadable", "err", err)
			return 0, false, nil
		}
		if count >= g.target {
			return count, true, nil
		}
		if !first && count > last {
			deadline.Reset(maxWait)
			progress = time.Now()
		}
		last = count
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("wait for the guest to read the last keys: %w", ctx.Err())
		case <-deadline.C:
			if st, err := Status(ctx, ex); err != nil || st != "running" {
				g.unpaced("the guest read nothing and is not seen running", "status", st, "err", err, "unread", g.target-count)
				return 0, false, nil
			}
			if idle := time.Since(progress); idle >= stall {
				return 0, false, fmt.Errorf("%w: the guest, running, read no key for %s (%d of the last keys' %d bytes still queued): the keys after them were not sent, so none was lost; a guest this starved of CPU needs a quieter host", desktop.ErrUnavailable, idle.Round(time.Second), g.target-count, g.lastBytes)
			}
			deadline.Reset(maxWait)
		case <-tick.C:
		}
	}
}
