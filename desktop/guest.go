package desktop

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The guest agent (qemu-guest-agent) runs commands inside the guest. These
// helpers speak its documented commands through any GuestAgent, so every
// driver shares them; moving files is drive's (drive/files.go), the one
// guest-agent file client.

// ExecRequest is a program to run in the guest.
type ExecRequest struct {
	Path    string
	Args    []string
	Env     []string
	Stdin   []byte
	Timeout time.Duration
	// MaxOutput bounds stdout and stderr each; longer output is cut and
	// reported as truncated.
	MaxOutput int
}

// ExecResult is how a guest program ended.
type ExecResult struct {
	ExitCode        int
	Signal          int
	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool
	StderrTruncated bool
	Duration        time.Duration
}

// DefaultMaxOutput bounds a program's captured output when not given.
const DefaultMaxOutput = 1 << 20

// execPollStart, execPollBrisk and execPollMax space the guest-exec-status
// polls: QGA has no way to wait for a process, so polling is the only
// option. Quick at first, since most commands end within milliseconds;
// at most execPollBrisk apart for execBrisk, since under TCG a short
// command (a mount, a file listing) takes 50 to 300 ms and backing off to
// execPollMax at once would add up to 100 ms to its answer; then backing
// off, so a long command costs the guest's agent little.
const (
	execPollStart = 2 * time.Millisecond
	execPollBrisk = 20 * time.Millisecond
	execBrisk     = time.Second
	execPollMax   = 100 * time.Millisecond
)

// nextExecPoll is the wait before the next status poll, after waiting
// wait, with the program running for elapsed.
func nextExecPoll(wait, elapsed time.Duration) time.Duration {
	if elapsed < execBrisk {
		return min(2*wait, execPollBrisk)
	}
	return min(2*wait, execPollMax)
}

// Exec runs a program in the guest and waits for it, up to req.Timeout.
func Exec(ctx context.Context, a GuestAgent, req ExecRequest) (ExecResult, error) {
	if req.Path == "" {
		return ExecResult{}, fmt.Errorf("%w: exec: no program given", ErrInvalid)
	}
	if req.Timeout <= 0 {
		req.Timeout = 30 * time.Second
	}
	if req.MaxOutput <= 0 {
		req.MaxOutput = DefaultMaxOutput
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	args := map[string]any{"path": req.Path, "capture-output": true}
	if len(req.Args) > 0 {
		args["arg"] = req.Args
	}
	if len(req.Env) > 0 {
		args["env"] = req.Env
	}
	if len(req.Stdin) > 0 {
		args["input-data"] = base64.StdEncoding.EncodeToString(req.Stdin)
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := a.Call(ctx, "guest-exec", args, &started); err != nil {
		return ExecResult{}, fmt.Errorf("exec %s: %w", req.Path, err)
	}
	wait := execPollStart
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ExecResult{}, fmt.Errorf("%w: exec %s: still running after %s", ErrUnavailable, req.Path, req.Timeout)
		case <-timer.C:
		}
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			Signal   int    `json:"signal"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
			OutTrunc bool   `json:"out-truncated"`
			ErrTrunc bool   `json:"err-truncated"`
		}
		if err := a.Call(ctx, "guest-exec-status", map[string]int{"pid": started.PID}, &st); err != nil {
			return ExecResult{}, fmt.Errorf("exec %s: %w", req.Path, err)
		}
		if st.Exited {
			res := ExecResult{ExitCode: st.ExitCode, Signal: st.Signal, Duration: time.Since(start)}
			var err error
			if res.Stdout, res.StdoutTruncated, err = decodeOutput(st.OutData, req.MaxOutput); err != nil {
				return ExecResult{}, err
			}
			if res.Stderr, res.StderrTruncated, err = decodeOutput(st.ErrData, req.MaxOutput); err != nil {
				return ExecResult{}, err
			}
			res.StdoutTruncated = res.StdoutTruncated || st.OutTrunc
			res.StderrTruncated = res.StderrTruncated || st.ErrTrunc
			return res, nil
		}
		timer.Reset(wait)
		wait = nextExecPoll(wait, time.Since(start))
	}
}

func decodeOutput(b64 string, limit int) ([]byte, bool, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, false, fmt.Errorf("exec: guest agent sent malformed output: %w", err)
	}
	if len(data) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// Shell runs a shell command line in the guest.
func Shell(ctx context.Context, a GuestAgent, script string, timeout time.Duration) (ExecResult, error) {
	return Exec(ctx, a, ExecRequest{Path: "/bin/sh", Args: []string{"-c", script}, Timeout: timeout})
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func openGuestFile(ctx context.Context, a GuestAgent, path, mode string) (int64, error) {
	var h int64
	if err := a.Call(ctx, "guest-file-open", map[string]string{"path": path, "mode": mode}, &h); err != nil {
		return 0, fmt.Errorf("open %s in the guest: %w", path, err)
	}
	return h, nil
}

func closeGuestFile(ctx context.Context, a GuestAgent, h int64) error {
	if err := a.Call(context.WithoutCancel(ctx), "guest-file-close", map[string]int64{"handle": h}, nil); err != nil {
		return fmt.Errorf("close guest file: %w", err)
	}
	return nil
}

// SetTime sets the guest's clock (and its RTC, through hwclock) to now.
func SetTime(ctx context.Context, a GuestAgent, now time.Time) error {
	if err := a.Call(ctx, "guest-set-time", map[string]int64{"time": now.UnixNano()}, nil); err != nil {
		return fmt.Errorf("set guest clock: %w", err)
	}
	return nil
}

// SetIdentity gives a restored clone its own hostname and machine-id.
// Every clone of a snapshot starts with the template's clock and identity
// (the Manager sets the clock first, with SetTime); vmgenid already
// reseeded its RNG. The files are written through the guest agent, the
// running hostname through /proc, so no process runs in the guest for it.
func SetIdentity(ctx context.Context, a GuestAgent, hostname, machineID string) error {
	for _, f := range []struct{ path, content string }{
		{"/etc/hostname", hostname + "\n"},
		{"/proc/sys/kernel/hostname", hostname + "\n"},
		{"/etc/machine-id", machineID + "\n"},
	} {
		if err := writeSmallFile(ctx, a, f.path, f.content); err != nil {
			return fmt.Errorf("set guest identity: %w", err)
		}
	}
	return nil
}

// writeSmallFile replaces a guest file's content in one write.
func writeSmallFile(ctx context.Context, a GuestAgent, path, content string) error {
	var h int64
	if err := a.Call(ctx, "guest-file-open", map[string]string{"path": path, "mode": "w"}, &h); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	err := a.Call(ctx, "guest-file-write", map[string]any{"handle": h, "buf-b64": base64.StdEncoding.EncodeToString([]byte(content))}, nil)
	if cerr := a.Call(ctx, "guest-file-close", map[string]int64{"handle": h}, nil); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
