package e2b

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

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

var scrotLine = regexp.MustCompile(`^scrot --pointer (/tmp/screenshot-[A-Za-z0-9]{1,64}\.png)$`)

// sdkLine is the LINE of `bash -l -c LINE`, the form the SDKs send every
// command in.
func sdkLine(cfg processConfig) (string, bool) {
	if cfg.Cmd != "/bin/bash" || len(cfg.Args) != 3 || cfg.Args[0] != "-l" || cfg.Args[1] != "-c" {
		return "", false
	}
	return cfg.Args[2], true
}

// parseFast recognises the SDK's command lines: `bash -l -c LINE` with
// LINE exactly scrot --pointer FILE, or one of the xdotool lines
// input.DecodeXdotool reads.
func parseFast(cfg processConfig) (fastCommand, bool) {
	line, ok := sdkLine(cfg)
	if !ok {
		return fastCommand{}, false
	}
	if m := scrotLine.FindStringSubmatch(line); m != nil {
		return fastCommand{shotPath: m[1]}, true
	}
	batch, ok := input.DecodeXdotool(line)
	return fastCommand{batch: batch}, ok
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
