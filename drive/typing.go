package drive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Text the US layout cannot type (accents, CJK, emoji) is typed by X's
// XTEST extension inside the guest, as key presses on spare keycodes that
// are bound to the wanted characters first.
//
// Why not `xdotool type`: for each character missing from the keymap it
// binds a scratch keycode, presses it and unbinds it at once; clients such
// as xterm fetch the new keymap lazily, after the unbinding, so characters
// come out wrong or not at all. Measured on the minimal image under TCG:
// "naïve café 日本語 🙂" typed with --delay 0 came out as "nave caf 語🙂",
// with --delay 30 as "naïve café 語🙂". Binding every character of the text
// to its own keycode before pressing anything, and leaving the bindings in
// place, typed it exactly every time (also three segments of six CJK
// characters rebinding the same keycodes back to back).
//
// X repeats a key held longer than its repeat delay (660 ms by default). A
// guest stalled between xdotool's press and release (TCG on a loaded host)
// typed a character twice in CI ("🙂🙂"), so the typing script turns the
// server's autorepeat off while it types and puts it back as it was.
//
// Why not the clipboard and a paste key: which key pastes which selection
// depends on the application (xterm pastes PRIMARY on Shift+Insert and
// has no CLIPBOARD paste key), and it would overwrite the user's clipboard.

// typingPrelude starts every typing script: stop at the first failure, and
// no autorepeat until the script ends.
const typingPrelude = `set -e
repeat=$(xset q | awk '/auto repeat:/ { print $3; exit }')
xset r off
trap '[ "$repeat" != on ] || xset r on' EXIT
`

// typingSlots remembers which spare keycode holds which character, so a
// keycode just used is rebound last (least recently used first): rebinding
// a keycode while a client still has key presses of it queued is the one
// way this method can still go wrong.
type typingSlots struct {
	mu       sync.Mutex
	keycodes []int
	holds    []rune
	used     []uint64
	clock    uint64
}

// keycodeScript lists the keycodes the guest's keymap had no symbol on the
// first time we looked, and keeps the list in the guest (tmpfs), so a later
// hostd finds the same ones although they are bound by then.
const keycodeScript = `f=/run/warmdesk-keycodes
[ -d /run ] && [ -w /run ] || f=/tmp/.warmdesk-keycodes
if [ ! -s "$f" ]; then
  xmodmap -pke | awk 'NF == 3 && $2 > 8 { print $2 }' > "$f.new" && mv "$f.new" "$f"
fi
cat "$f"`

// guestTyper implements guestTypist for one desktop.
type guestTyper struct {
	s     *Service
	id    string
	dev   *device
	slots *typingSlots
}

var _ guestTypist = guestTyper{}

func (g guestTyper) TypeText(ctx context.Context, text string) error {
	// The runner's device checks control on every frame; text through the
	// guest bypasses it, so it checks here.
	d, err := g.s.mgr.Get(g.id)
	if err != nil {
		return err
	}
	if err := d.InputAllowed(); err != nil {
		return err
	}
	// Text typed in the guest must not overtake a click either.
	if err := g.dev.syncKeys(ctx); err != nil {
		return err
	}
	g.slots.mu.Lock()
	defer g.slots.mu.Unlock()
	if len(g.slots.keycodes) == 0 {
		if err := g.discover(ctx); err != nil {
			return err
		}
	}
	script := g.slots.script(text)
	timeout := 10*time.Second + time.Duration(utf8.RuneCountInString(text))*20*time.Millisecond
	res, err := g.s.shell(ctx, g.id, script, nil, timeout)
	g.dev.markKeys(time.Now())
	g.s.poke(g.id)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("type in the guest: exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

func (g guestTyper) discover(ctx context.Context) error {
	res, err := g.s.shell(ctx, g.id, keycodeScript, nil, 10*time.Second)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("find spare keycodes in the guest: exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	codes, err := parseKeycodes(string(res.Stdout))
	if err != nil {
		return err
	}
	g.slots.reset(codes)
	return nil
}

func parseKeycodes(out string) ([]int, error) {
	var codes []int
	for _, f := range strings.Fields(out) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 8 || n > 255 {
			return nil, fmt.Errorf("spare keycodes: unexpected %.40q", f)
		}
		codes = append(codes, n)
	}
	if len(codes) == 0 {
		return nil, errors.New("the guest's keymap has no spare keycode to type characters outside the US layout")
	}
	return codes, nil
}

func (t *typingSlots) reset(codes []int) {
	t.keycodes = codes
	t.holds = make([]rune, len(codes))
	t.used = make([]uint64, len(codes))
}

// keysym names a character for xdotool and xmodmap (XStringToKeysym reads
// "U+hex" as the character's keysym, Latin-1 ones as their legacy keysyms).
func keysym(r rune) string {
	switch r {
	case '\n':
		return "Return"
	case '\t':
		return "Tab"
	}
	return fmt.Sprintf("U%04X", r)
}

// script builds the shell script that types text: for each segment (as
// many distinct non-ASCII characters as there are spare keycodes) one
// xmodmap binding them, then one xdotool pressing every key. Bindings are
// re-applied even when remembered, in case someone changed the keymap.
// Every word of the script is ours: the text itself never reaches a shell.
func (t *typingSlots) script(text string) string {
	var b strings.Builder
	b.WriteString(typingPrelude)
	var keys []string
	need := map[rune]bool{}
	var order []rune
	flush := func() {
		if len(keys) == 0 {
			return
		}
		if len(order) > 0 {
			b.WriteString("xmodmap")
			for _, r := range order {
				kc := t.bind(r, need)
				fmt.Fprintf(&b, " -e 'keycode %d = %s %s'", kc, keysym(r), keysym(r))
			}
			b.WriteString("\n")
		}
		b.WriteString("xdotool key --clearmodifiers --delay 0 " + strings.Join(keys, " ") + "\n")
		keys, order = keys[:0], order[:0]
		clear(need)
	}
	prevCR := false
	for _, r := range text {
		if r == '\r' {
			r, prevCR = '\n', true
		} else if r == '\n' && prevCR {
			prevCR = false
			continue // "\r\n" is one Return
		} else {
			prevCR = false
		}
		if r >= 0x80 && !need[r] {
			if len(order) == len(t.keycodes) {
				flush()
			}
			need[r] = true
			order = append(order, r)
		}
		keys = append(keys, keysym(r))
	}
	flush()
	return b.String()
}

// bind returns the keycode that holds r, binding the least recently used
// one that no other character of the segment needs.
func (t *typingSlots) bind(r rune, segment map[rune]bool) int {
	t.clock++
	best := -1
	for i, h := range t.holds {
		if h == r {
			best = i
			break
		}
		if segment[h] && h != 0 {
			continue
		}
		if best < 0 || t.used[i] < t.used[best] {
			best = i
		}
	}
	t.holds[best], t.used[best] = r, t.clock
	return t.keycodes[best]
}
