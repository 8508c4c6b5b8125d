package e2b

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// Fast paths: @e2b/desktop does everything through shell commands in the
// guest (scrot, then reading the file back; xdotool for the pointer and
// the keyboard), each a login shell under TCG. The exact command lines it
// sends for a screenshot, pointer input, typing and key presses are
// recognised and served by hostd's own screen mirror and input path
// instead, with the same result for the SDK: the PNG of the screen with
// its pointer (the guest draws it), the pointer moved, the buttons and
// keys pressed, the text typed. Anything else, or anything these cannot
// do as asked, runs in the guest as sent.
//
// Typing matters beyond speed: `xdotool type` binds a scratch keycode for
// each character missing from the keymap and unbinds it right after the
// press, and a client that fetches the keymap late reads the character
// as nothing (CI lost the ö of "hello, wörld" typed into xterm this way).
// The input path binds every character before pressing any (drive's
// typing.go).

// fastCommand is a recognised command line.
type fastCommand struct {
	// shotPath is scrot's output file, for a screenshot.
	shotPath string
	// batch is pointer input.
	batch input.Batch
	// refusal, when set, fails the command with this reason, nothing run.
	refusal error
}

var (
	scrotLine = regexp.MustCompile(`^scrot --pointer (/tmp/screenshot-[A-Za-z0-9]{1,64}\.png)$`)
	// typeLine is write(): xdotool type --delay MS -- WORD, the word
	// quoted by the SDK's quoteString.
	typeLine = regexp.MustCompile(`(?s)^xdotool type --delay (0|[1-9][0-9]{0,4}) -- (.+)$`)
	// keyLine is press(): xdotool key CHORD, the SDK's key names joined
	// by "+".
	keyLine = regexp.MustCompile(`^xdotool key ([A-Za-z0-9_+]{1,64})$`)
	// xdotoolButtons maps xdotool's button numbers to ours.
	xdotoolButtons = map[string]input.Button{"1": input.ButtonLeft, "2": input.ButtonMiddle, "3": input.ButtonRight}
)

// sdkLine is the LINE of `bash -l -c LINE`, the form the SDKs send every
// command in.
func sdkLine(cfg processConfig) (string, bool) {
	if cfg.Cmd != "/bin/bash" || len(cfg.Args) != 3 || cfg.Args[0] != "-l" || cfg.Args[1] != "-c" {
		return "", false
	}
	return cfg.Args[2], true
}

// parseFast recognises the SDK's command lines: `bash -l -c LINE` with
// LINE exactly one of scrot --pointer FILE; xdotool mousemove [--sync]
// X Y; xdotool click [--repeat N] B; xdotool mousedown B; xdotool
// mouseup B; xdotool type --delay MS -- WORD; xdotool key CHORD.
func parseFast(cfg processConfig) (fastCommand, bool) {
	line, ok := sdkLine(cfg)
	if !ok {
		return fastCommand{}, false
	}
	if m := scrotLine.FindStringSubmatch(line); m != nil {
		return fastCommand{shotPath: m[1]}, true
	}
	if m := typeLine.FindStringSubmatch(line); m != nil {
		text, ok := unquoteSDKWord(m[2])
		// The input path types text as given; one the SDK never sends
		// (not UTF-8, NUL, over the batch limit) goes to the guest.
		if !ok || text == "" || !utf8.ValidString(text) || strings.ContainsRune(text, 0) ||
			utf8.RuneCountInString(text) > input.DefaultLimits().MaxTextRunes {
			return fastCommand{}, false
		}
		// The delay between keys is xdotool's pacing; the input path
		// paces keys itself.
		return fastCommand{batch: input.Batch{{Kind: input.KindType, Text: text}}}, true
	}
	if m := keyLine.FindStringSubmatch(line); m != nil {
		if _, err := input.ParseChord(m[1]); err != nil {
			return fastCommand{}, false
		}
		return fastCommand{batch: input.Batch{{Kind: input.KindKey, Chord: m[1]}}}, true
	}
	f := strings.Split(line, " ")
	if len(f) < 3 || f[0] != "xdotool" {
		return fastCommand{}, false
	}
	num := func(s string, max int) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= max && strconv.Itoa(n) == s
	}
	switch f[1] {
	case "mousemove":
		args := f[2:]
		if len(args) == 3 && args[0] == "--sync" {
			args = args[1:]
		}
		x, okx := num(args[0], 1<<15)
		if len(args) != 2 || !okx {
			return fastCommand{}, false
		}
		y, oky := num(args[1], 1<<15)
		if !oky {
			return fastCommand{}, false
		}
		return fastCommand{batch: input.Batch{{Kind: input.KindMove, At: &input.Point{X: x, Y: y}}}}, true
	case "click":
		repeat, args := 1, f[2:]
		if len(args) == 3 && args[0] == "--repeat" {
			n, ok := num(args[1], 100)
			if !ok || n < 1 {
				return fastCommand{}, false
			}
			repeat, args = n, args[2:]
		}
		if len(args) != 1 {
			return fastCommand{}, false
		}
		switch args[0] {
		case "4", "5": // the wheel, as xdotool sends it
			dy := repeat
			if args[0] == "4" {
				dy = -repeat
			}
			return fastCommand{batch: input.Batch{{Kind: input.KindScroll, DY: dy}}}, true
		}
		b, ok := xdotoolButtons[args[0]]
		if !ok || repeat > 3 {
			return fastCommand{}, false
		}
		return fastCommand{batch: input.Batch{{Kind: input.KindClick, Button: b, Count: repeat}}}, true
	case "mousedown", "mouseup":
		b, ok := xdotoolButtons[f[2]]
		if len(f) != 3 || !ok {
			return fastCommand{}, false
		}
		kind := input.KindMouseDown
		if f[1] == "mouseup" {
			kind = input.KindMouseUp
		}
		return fastCommand{batch: input.Batch{{Kind: kind, Button: b}}}, true
	}
	return fastCommand{}, false
}

// streamLines are the commands @e2b/desktop's stream.start() begins with:
// x11vnc's password file (with requireAuth), then x11vnc itself (-bg
// optional, for SDKs that leave it out).
var streamLines = regexp.MustCompile(`^x11vnc (-storepasswd \S+ ~/\.vnc/passwd|(-bg )?-display \S+ -forever -wait 50 -shared -rfbport [0-9]+ -(nopw|usepw) 2>/tmp/x11vnc_stderr\.log( -id \S+)?)$`)

// streamStart says whether a command is the SDK's stream.start().
func streamStart(cfg processConfig) bool {
	line, ok := sdkLine(cfg)
	return ok && streamLines.MatchString(line)
}

// streamRefusal is why stream.start() fails without a domain: the URL
// the SDK then builds for it, https://6080-ID.e2b.app/vnc.html, is E2B's
// cloud, and hostd serves no TLS at a wildcard name of its own. It names
// what works against this host instead.
func streamRefusal(r *http.Request, id string) error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return fmt.Errorf("warmdesk: stream.start() refused, nothing was started: this hostd gives its sandboxes no domain, so stream.getUrl() would be "+
		"https://6080-%s.e2b.app/vnc.html (or under E2B_DOMAIN), a host that is not this one. Watch this sandbox in hostd's own viewer, %s://%s/desktops/%s "+
		"(log in with hostd's token, or send a link from POST /v1/desktops/%s/tokens), or serve with --e2b-domain DOMAIN behind TLS and a wildcard "+
		"name that routes 6080-ID.DOMAIN to the guest's port 6080 (docs/E2B.md)", id, scheme, r.Host, id, id)
}

// sdkWord is one word as the SDK's quoteString leaves it bare.
var sdkWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// unquoteSDKWord undoes the SDK's quoteString: a bare word of safe
// characters, or the text in single quotes with each ' written '"'"'.
// Only what quoteString itself produces is taken: the text quoted again
// must give back the word.
func unquoteSDKWord(word string) (string, bool) {
	if sdkWord.MatchString(word) {
		return word, true
	}
	if len(word) < 2 || word[0] != '\'' || word[len(word)-1] != '\'' {
		return "", false
	}
	text := strings.ReplaceAll(word[1:len(word)-1], `'"'"'`, "'")
	if sdkWord.MatchString(text) || "'"+strings.ReplaceAll(text, "'", `'"'"'`)+"'" != word {
		return "", false
	}
	return text, true
}

// fastPIDs are the pids fast commands report: above Linux's largest pid,
// so no guest process ever has one.
var fastPIDs atomic.Int64

func init() { fastPIDs.Store(1 << 22) }

// runFast serves a recognised command. A refusal (a person in control,
// a point off the screen) ends it as a failed command would, exit 1 with
// the reason on stderr.
func (s *Server) runFast(ctx context.Context, d desktop.Desktop, fc fastCommand, st *stream) {
	pid := int(fastPIDs.Add(1))
	if st.Send(eventMessage{Event: processEvent{Start: &startEvent{PID: pid}}}) != nil {
		return
	}
	end := &endEvent{Exited: true, Status: "exit status 0"}
	if err := s.doFast(ctx, d, fc); err != nil {
		s.log.Debug("e2b fast path refused", "sandbox", d.ID, "err", err)
		st.Send(eventMessage{Event: processEvent{Data: &dataEvent{Stderr: []byte(err.Error() + "\n")}}})
		end = &endEvent{ExitCode: 1, Exited: true, Status: "exit status 1", Error: "exit status 1"}
		if fc.refusal != nil {
			// The SDK's CommandExitError says this, not only stderr.
			end.Error = "exit status 1: " + err.Error()
		}
	}
	if st.Send(eventMessage{Event: processEvent{End: end}}) == nil {
		st.End(nil)
	}
}

func (s *Server) doFast(ctx context.Context, d desktop.Desktop, fc fastCommand) error {
	if fc.refusal != nil {
		return fc.refusal
	}
	if fc.shotPath != "" {
		scr, _, err := s.cfg.Guest.LiveScreen(ctx, d.ID)
		if err != nil {
			return err
		}
		shot, err := scr.Capture(ctx, screenshot.Options{Format: screenshot.PNG})
		if err != nil {
			return err
		}
		s.shots.put(d.ID, fc.shotPath, shot.Data)
		return nil
	}
	out, err := s.cfg.Guest.Run(ctx, d.ID, drive.Request{Batch: fc.batch})
	if err == nil {
		err = out.Err
	}
	return err
}

// shotStore holds fast screenshots until the SDK reads and removes them,
// or shotKeep passes.
type shotStore struct {
	mu sync.Mutex
	m  map[string]map[string]heldShot // sandbox, path
}

type heldShot struct {
	png []byte
	at  time.Time
}

const (
	shotKeep    = time.Minute
	shotsPerSbx = 8
)

func newShotStore() *shotStore { return &shotStore{m: map[string]map[string]heldShot{}} }

func (ss *shotStore) put(sandbox, path string, png []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	held := ss.m[sandbox]
	if held == nil {
		held = map[string]heldShot{}
		ss.m[sandbox] = held
	}
	now := time.Now()
	for p, h := range held {
		if now.Sub(h.at) > shotKeep || len(held) >= shotsPerSbx {
			delete(held, p)
		}
	}
	held[path] = heldShot{png: png, at: now}
}

// get returns a held screenshot of this path.
func (ss *shotStore) get(sandbox, path string) ([]byte, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	h, ok := ss.m[sandbox][path]
	if !ok || time.Since(h.at) > shotKeep {
		return nil, false
	}
	return h.png, true
}

// remove drops one, saying whether it was held.
func (ss *shotStore) remove(sandbox, path string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.m[sandbox][path]
	delete(ss.m[sandbox], path)
	return ok
}

func (ss *shotStore) forget(sandbox string) {
	ss.mu.Lock()
	delete(ss.m, sandbox)
	ss.mu.Unlock()
}
