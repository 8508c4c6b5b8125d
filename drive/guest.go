package drive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// Guest commands run through qemu-guest-agent's guest-exec, wrapped in
// coreutils: `timeout` kills a program at its deadline inside the guest
// (so a runaway program ends and reports 124, instead of the host giving up
// on an agent that is fine), and `env` adds variables and a working
// directory (guest-exec in QEMU 7.2 has no cwd, and its env replaces the
// whole environment, PATH included).

// killGrace is how long `timeout` waits after TERM before KILL.
const killGrace = 2 * time.Second

// agentMargin is how long past a program's own timeout the host waits for
// the guest agent before calling it unavailable.
const agentMargin = 3 * time.Second

// GuestWait bounds how long a guest operation waits for a new desktop's
// guest to be set up (its clock, identity and on_create commands), within
// the caller's own deadline. The wait comes before the program's timeout,
// not out of it: an agent's first call right after a create used to run
// out of a helper's few seconds while the guest was still being set up.
const GuestWait = time.Minute

// guestMachine finds a running desktop's machine once its guest has its
// own clock and identity, waiting for that up to GuestWait.
func (s *Service) guestMachine(ctx context.Context, id string) (desktop.Machine, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, GuestWait)
	defer cancel()
	mach, _, err := s.runningMachine(wctx, id, desktop.WaitSetUp, "reach the guest agent of")
	if err != nil && wctx.Err() != nil && errors.Is(err, desktop.ErrUnavailable) {
		return nil, fmt.Errorf("%w: desktop %s: its guest is still being set up (clock, identity, on_create commands) after %s: try again in a few seconds", desktop.ErrUnavailable, id, time.Since(start).Round(time.Millisecond))
	}
	return mach, err
}

// runningMachine finds a desktop's machine (once its guest's set-up has
// gone as far as wait) and refuses a desktop that is not running with a
// transition error naming action.
func (s *Service) runningMachine(ctx context.Context, id string, wait desktop.Wait, action string) (desktop.Machine, desktop.Desktop, error) {
	mach, d, err := s.mgr.Machine(ctx, id, wait)
	if err != nil {
		return nil, d, err
	}
	if d.State != desktop.StateRunning {
		return nil, d, &desktop.TransitionError{ID: id, From: d.State, Action: action}
	}
	return mach, d, nil
}

// boundedAgent makes every guest agent call end when its context does.
// The agent serialises calls (it answers one at a time), so a call can sit
// behind a slow one; without this it would wait past its own deadline.
type boundedAgent struct{ a desktop.GuestAgent }

func (b boundedAgent) Call(ctx context.Context, command string, args, result any) error {
	type reply struct {
		raw json.RawMessage
		err error
	}
	done := make(chan reply, 1)
	go func() {
		var raw json.RawMessage
		err := b.a.Call(ctx, command, args, &raw)
		done <- reply{raw, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || result == nil || len(r.raw) == 0 {
			return r.err
		}
		if err := json.Unmarshal(r.raw, result); err != nil {
			return fmt.Errorf("guest agent %s: decode: %w", command, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: the guest agent did not answer %s in time: %w", desktop.ErrUnavailable, command, ctx.Err())
	}
}

// execArgv wraps a program in timeout and, when needed, env.
func execArgv(req ExecRequest) (string, []string) {
	if req.bare {
		return req.Path, req.Args
	}
	argv := []string{"-k", seconds(killGrace), seconds(req.Timeout)}
	if len(req.Env) > 0 || req.Cwd != "" {
		argv = append(argv, "env")
		if req.Cwd != "" {
			argv = append(argv, "-C", req.Cwd)
		}
		argv = append(argv, "--")
		for _, k := range slices.Sorted(maps.Keys(req.Env)) {
			argv = append(argv, k+"="+req.Env[k])
		}
	}
	argv = append(argv, req.Path)
	return "timeout", append(argv, req.Args...)
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// timedOut tells a program `timeout` ended (124 after TERM, 137 after
// KILL) from one that exited with those codes itself before its deadline.
func timedOut(res desktop.ExecResult, limit time.Duration) bool {
	return (res.ExitCode == 124 || res.ExitCode == 137) && res.Duration >= limit
}

// Exec runs a program in the guest and waits for it, for a caller of the
// API: the desktop's event stream (and a recording's action log) hears of it.
func (s *Service) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	res, err := s.exec(ctx, id, req)
	s.announceExec(id, req, res, err)
	return res, err
}

// announceExec tells the desktop's events that a command ran: the program
// and how it ended, not its arguments, which may hold secrets and which a
// view token (that may read events) may not see.
func (s *Service) announceExec(id string, req ExecRequest, res ExecResult, err error) {
	line := "exec " + req.Path
	if len(line) > 120 {
		line = line[:117] + "..."
	}
	switch {
	case err != nil:
		line += ": " + err.Error()
	case res.TimedOut:
		line += ": timed out"
	default:
		line += fmt.Sprintf(": exit %d", res.ExitCode)
	}
	s.mgr.Events().Announce(id, desktop.EventExec, line)
}

// overdueSlack is how long past its timeout a program's end may take to
// reach the guest agent before its process group is ended from the host.
const overdueSlack = 250 * time.Millisecond

// exec is Exec without the announcement, for our own helper scripts.
func (s *Service) exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	if err := req.Check(); err != nil {
		return ExecResult{}, err
	}
	mach, err := s.guestMachine(ctx, id)
	if err != nil {
		return ExecResult{}, err
	}
	res, err := s.execOn(ctx, boundedAgent{mach.Agent()}, req)
	if err != nil {
		return ExecResult{}, fmt.Errorf("desktop %s: %w", id, err)
	}
	return res, nil
}

// execOn runs a checked request through a guest agent. timeout(1) ends
// the program's process group at the deadline, but only while the program
// itself runs: one that exits leaving a process that holds its output (a
// job sent to the background) kept the agent from reporting the end until
// the host gave up (a 504 after the timeout and the agent's margin, the
// job still running). Such a group is ended from here, overdueSlack after
// the deadline, and the answer says timed_out.
func (s *Service) execOn(ctx context.Context, agent desktop.GuestAgent, req ExecRequest) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+agentMargin)
	defer cancel()
	var pid atomic.Int64
	ag := startedAgent{agent, func(p int) { pid.Store(int64(p)) }}
	overdue := time.AfterFunc(req.Timeout+overdueSlack, func() {
		if p := pid.Load(); p > 0 && !req.bare { // a bare program leads no group
			s.killGroup(ctx, agent, int(p))
		}
	})
	path, args := execArgv(req)
	res, err := desktop.Exec(ctx, ag, desktop.ExecRequest{
		Path: path, Args: args, Stdin: req.Stdin, Timeout: req.Timeout + agentMargin, MaxOutput: req.MaxOutput,
	})
	ended := !overdue.Stop() && pid.Load() > 0 && !req.bare
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{ExecResult: res, TimedOut: ended || timedOut(res, req.Timeout)}, nil
}

// startedAgent tells started the process id of each program a guest-exec
// starts.
type startedAgent struct {
	desktop.GuestAgent
	started func(pid int)
}

func (a startedAgent) Call(ctx context.Context, command string, args, result any) error {
	if command != "guest-exec" {
		return a.GuestAgent.Call(ctx, command, args, result)
	}
	var raw json.RawMessage
	if err := a.GuestAgent.Call(ctx, command, args, &raw); err != nil {
		return err
	}
	var st struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(raw, &st) == nil && st.PID > 0 {
		a.started(st.PID)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("guest agent %s: decode: %w", command, err)
	}
	return nil
}

// shell runs a short helper script of ours in the guest, with DISPLAY set
// for the X tools, and fails on a non-zero exit.
func (s *Service) shell(ctx context.Context, id, script string, stdin []byte, timeout time.Duration, args ...string) (desktop.ExecResult, error) {
	res, err := s.exec(ctx, id, ExecRequest{
		Path: "/bin/sh", Args: append([]string{"-c", "export DISPLAY=${DISPLAY:-:0}\n" + script, "sh"}, args...),
		Stdin: stdin, Timeout: timeout, MaxOutput: desktop.DefaultMaxOutput,
	})
	if err != nil {
		return res.ExecResult, err
	}
	if res.TimedOut {
		return res.ExecResult, fmt.Errorf("%w: desktop %s: guest helper still running after %s", desktop.ErrUnavailable, id, timeout)
	}
	return res.ExecResult, nil
}

// LocatePointer asks X where the pointer is and tells the runner.
func (s *Service) LocatePointer(ctx context.Context, id string) error {
	d, err := s.desk(id)
	if err != nil {
		return err
	}
	res, err := s.shell(ctx, id, "xdotool getmouselocation --shell", nil, 5*time.Second)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("xdotool getmouselocation: exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	p, ok := parsePointer(string(res.Stdout))
	if !ok {
		return fmt.Errorf("xdotool getmouselocation: unexpected output %.80q", res.Stdout)
	}
	d.runner.NotePointer(p)
	return nil
}

// parsePointer reads `xdotool getmouselocation --shell` ("X=1\nY=2\n...").
func parsePointer(out string) (input.Point, bool) {
	var p input.Point
	var hasX, hasY bool
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
		case k == "X":
			p.X, hasX = n, true
		case k == "Y":
			p.Y, hasY = n, true
		}
	}
	return p, hasX && hasY
}

// clipboardScript reads or writes an X selection with xclip. xclip -i
// forks a child that serves the selection until another client takes it:
// its output must not hold the guest agent's pipes open, or the exec would
// never end.
const (
	clipboardGet   = `exec xclip -selection "$1" -o`
	clipboardSet   = `xclip -selection "$1" -i >/dev/null 2>&1`
	clipboardClear = `xclip -selection "$1" -i </dev/null >/dev/null 2>&1`
)

// clipboardTimeout bounds xclip in the guest (it answers in well under a
// second even under TCG); the agent then gets agentMargin more.
const clipboardTimeout = 5 * time.Second

// Clipboard reads an X selection ("clipboard" or "primary", see
// Selection) as text; an empty selection reads as "".
func (s *Service) Clipboard(ctx context.Context, id, selection string) (string, error) {
	selection, err := Selection(selection)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, ClipboardTimeout)
	defer cancel()
	res, err := s.shell(ctx, id, clipboardGet, nil, clipboardTimeout, selection)
	switch {
	case err != nil:
		return "", err
	case res.ExitCode == 1 && bytes.Contains(res.Stderr, []byte("not available")):
		return "", nil // nobody owns the selection, or it holds no text
	case res.ExitCode != 0:
		return "", fmt.Errorf("read the %s selection of %s: xclip exit %d: %s", selection, id, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return string(res.Stdout), nil
}

// SetClipboard sets an X selection to text.
func (s *Service) SetClipboard(ctx context.Context, id, selection, text string) error {
	selection, err := Selection(selection)
	if err != nil {
		return err
	}
	if err := checkClipboardText(text); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ClipboardTimeout)
	defer cancel()
	script := clipboardSet
	if text == "" {
		// guest-exec sends no stdin for empty input: the child would read
		// whatever the agent's stdin is.
		script = clipboardClear
	}
	res, err := s.shell(ctx, id, script, []byte(text), clipboardTimeout, selection)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("set the %s selection of %s: xclip exit %d (is xclip installed and X running?)", selection, id, res.ExitCode)
	}
	return nil
}
