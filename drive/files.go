package drive

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	pathpkg "path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Files move through qemu-guest-agent's guest-file-* commands in chunks,
// so neither side holds a whole file: a download is read chunk by chunk as
// the client takes it, an upload written as it arrives.

const (
	// fileChunk is what one guest-file-read or -write moves (base64 in a
	// JSON line on the agent's serial port).
	fileChunk = 1 << 20
	// fileCallTimeout bounds each guest agent call of a transfer.
	fileCallTimeout = 30 * time.Second
)

// guestFileError turns the guest agent's file errors into domain errors
// that say what is wrong with the path.
func guestFileError(path string, err error) error {
	if errors.Is(err, desktop.ErrUnavailable) || errors.Is(err, desktop.ErrInvalid) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "No such file or directory"):
		return fmt.Errorf("%w: %s does not exist in the guest", desktop.ErrNotFound, path)
	case strings.Contains(msg, "Not a directory"):
		return fmt.Errorf("%w: %s: a parent of it is not a directory", desktop.ErrNotFound, path)
	case strings.Contains(msg, "Is a directory"):
		return fmt.Errorf("%w: %s is a directory: only files can be read or written", desktop.ErrInvalid, path)
	case strings.Contains(msg, "Permission denied"), strings.Contains(msg, "Read-only file system"):
		return fmt.Errorf("%w: %s: %s", desktop.ErrInvalid, path, msg[strings.LastIndex(msg, ": ")+2:])
	}
	return fmt.Errorf("%s: %w", path, err)
}

// agentCall runs one guest agent call with its own deadline.
func agentCall(ctx context.Context, ag desktop.GuestAgent, timeout time.Duration, command string, args, result any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return ag.Call(ctx, command, args, result)
}

func openGuest(ctx context.Context, ag desktop.GuestAgent, path, mode string) (int64, error) {
	var h int64
	if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-open", map[string]string{"path": path, "mode": mode}, &h); err != nil {
		return 0, guestFileError(path, err)
	}
	return h, nil
}

// closeGuest closes a handle even when the request has ended: a handle
// left open stays open in the guest agent for good.
func closeGuest(ctx context.Context, ag desktop.GuestAgent, h int64) error {
	return agentCall(context.WithoutCancel(ctx), ag, 5*time.Second, "guest-file-close", map[string]int64{"handle": h}, nil)
}

type fileChunkReply struct {
	Count int    `json:"count"`
	Data  string `json:"buf-b64"`
	EOF   bool   `json:"eof"`
}

func readGuest(ctx context.Context, ag desktop.GuestAgent, h int64, n int) ([]byte, bool, error) {
	var c fileChunkReply
	if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-read", map[string]int64{"handle": h, "count": int64(n)}, &c); err != nil {
		return nil, false, err
	}
	data, err := base64.StdEncoding.DecodeString(c.Data)
	if err != nil {
		return nil, false, fmt.Errorf("guest agent sent malformed file data: %w", err)
	}
	return data, c.EOF || c.Count == 0, nil
}

// ReadFile opens a guest file; its Size comes from seeking to its end. The
// read is a use of the desktop until the file is closed (its TTL is held
// while a download streams).
func (s *Service) ReadFile(ctx context.Context, id, path string) (_ GuestFile, err error) {
	done := s.mgr.Use(id)
	defer func() {
		if err != nil {
			done()
		}
	}()
	if err := CheckGuestPath(path); err != nil {
		return nil, err
	}
	mach, err := s.guestMachine(ctx, id)
	if err != nil {
		return nil, err
	}
	ag := boundedAgent{mach.Agent()}
	h, err := openGuest(ctx, ag, path, "r")
	if err != nil {
		return nil, err
	}
	f := &guestFile{ctx: ctx, ag: ag, h: h, path: path, size: -1, unuse: done}
	var pos struct {
		Position int64 `json:"position"`
	}
	// Directories, pipes and devices cannot seek: their size is unknown,
	// and reading says what they are.
	if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-seek", map[string]any{"handle": h, "offset": 0, "whence": "end"}, &pos); err == nil {
		if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-seek", map[string]any{"handle": h, "offset": 0, "whence": "set"}, nil); err != nil {
			f.Close()
			return nil, guestFileError(path, err)
		}
		f.size = pos.Position
	}
	return f, nil
}

// guestFile reads a guest file a chunk at a time.
type guestFile struct {
	ctx  context.Context
	ag   desktop.GuestAgent
	h    int64
	path string
	size int64
	buf  []byte
	eof  bool
	done bool
	// unuse ends the read's use of the desktop.
	unuse func()
}

func (f *guestFile) Size() int64 { return f.size }

func (f *guestFile) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		data, eof, err := readGuest(f.ctx, f.ag, f.h, fileChunk)
		if err != nil {
			return 0, guestFileError(f.path, err)
		}
		f.buf, f.eof = data, eof
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *guestFile) Close() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.unuse != nil {
		defer f.unuse()
	}
	return closeGuest(f.ctx, f.ag, f.h)
}

// WriteFile replaces a guest file with r's bytes, atomically: they go into
// a temporary file beside it, which is renamed over the path only once
// complete (taking over an existing file's mode and owner). A failed or cut
// upload leaves the path as it was and no temporary file behind.
func (s *Service) WriteFile(ctx context.Context, id, path string, r io.Reader) (int64, error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	if err := CheckGuestPath(path); err != nil {
		return 0, err
	}
	r = &capped{r: r, left: MaxFileBytes}
	mach, err := s.guestMachine(ctx, id)
	if err != nil {
		return 0, err
	}
	ag := boundedAgent{mach.Agent()}
	tmp := uploadTempPath(path)
	var h int64
	if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-open", map[string]string{"path": tmp, "mode": "w"}, &h); err != nil {
		return 0, guestFileError(path, err)
	}
	n, err := writeGuest(ctx, ag, h, r)
	if err == nil {
		err = agentCall(ctx, ag, fileCallTimeout, "guest-file-flush", map[string]int64{"handle": h}, nil)
	}
	if cerr := closeGuest(ctx, ag, h); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = replaceGuestFile(ctx, ag, tmp, path)
	}
	if err != nil {
		s.removeGuestFile(ctx, ag, tmp)
		if errors.Is(err, ErrTooLarge) {
			return n, fmt.Errorf("%w: upload over the limit of %d bytes; nothing was written, %s is as it was", ErrTooLarge, MaxFileBytes, path)
		}
		return n, guestFileError(path, err)
	}
	return n, nil
}

// ErrTooLarge: a file is over MaxFileBytes.
var ErrTooLarge = errors.New("too large")

// capped reads at most left bytes and fails with ErrTooLarge past them.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a file of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, ErrTooLarge
		}
		return c.r.Read(p[:0])
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// uploadTempPath names an upload's temporary file: hidden, in the target's
// directory (so the rename stays in one filesystem), unique.
func uploadTempPath(target string) string {
	tag := make([]byte, 6)
	rand.Read(tag)
	return pathpkg.Join(pathpkg.Dir(target), "."+pathpkg.Base(target)+".warmdesk-upload-"+hex.EncodeToString(tag))
}

// replaceScript renames $1 over $2, giving it $2's mode and owner first when
// $2 exists. mv -T refuses to put a file in place of a directory.
const replaceScript = `if [ -e "$2" ] && [ ! -d "$2" ]; then chmod --reference="$2" -- "$1" && chown --reference="$2" -- "$1" || exit; fi; exec mv -fT -- "$1" "$2"`

func replaceGuestFile(ctx context.Context, ag desktop.GuestAgent, tmp, target string) error {
	res, err := desktop.Exec(ctx, ag, desktop.ExecRequest{Path: "/bin/sh", Args: []string{"-c", replaceScript, "sh", tmp, target}, Timeout: fileCallTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if strings.Contains(msg, "cannot overwrite directory") {
			return fmt.Errorf("%w: %s is a directory: only files can be read or written", desktop.ErrInvalid, target)
		}
		return fmt.Errorf("put the upload in place: %s", msg)
	}
	return nil
}

// removeGuestFile removes an upload's temporary file, also when the request
// that made it has ended.
func (s *Service) removeGuestFile(ctx context.Context, ag desktop.GuestAgent, path string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fileCallTimeout)
	defer cancel()
	if _, err := desktop.Exec(ctx, ag, desktop.ExecRequest{Path: "/bin/rm", Args: []string{"-f", "--", path}, Timeout: fileCallTimeout}); err != nil {
		s.log.Warn("upload's temporary file left in the guest", "path", path, "err", err)
	}
}

// writeGuest writes r into an open guest file until r ends. Only a clean
// io.EOF ends it: any other error, including a request body cut short
// (io.ErrUnexpectedEOF), fails the write.
func writeGuest(ctx context.Context, ag desktop.GuestAgent, h int64, r io.Reader) (int64, error) {
	buf := make([]byte, fileChunk)
	var total int64
	for {
		n, rerr := fill(r, buf)
		for data := buf[:n]; len(data) > 0; {
			var wrote struct {
				Count int `json:"count"`
			}
			args := map[string]any{"handle": h, "buf-b64": base64.StdEncoding.EncodeToString(data)}
			if err := agentCall(ctx, ag, fileCallTimeout, "guest-file-write", args, &wrote); err != nil {
				return total, err
			}
			if wrote.Count <= 0 || wrote.Count > len(data) {
				return total, fmt.Errorf("the guest agent wrote %d of %d bytes", wrote.Count, len(data))
			}
			data = data[wrote.Count:]
			total += int64(wrote.Count)
		}
		switch {
		case errors.Is(rerr, io.EOF):
			return total, nil
		case rerr != nil:
			return total, rerr
		}
	}
}

// fill reads into buf until it is full or r fails; io.EOF comes back as it
// is (io.ReadFull would turn an EOF after some bytes into
// io.ErrUnexpectedEOF, which a cut request body also returns).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// The guest agent hands a program's output over only once it has ended
// (guest-exec-status). To stream it, the program writes into two files
// that the host holds open and reads as they grow; the files are unlinked
// as soon as the program holds them, so nothing is left behind.
const streamScript = `exec >>"$1" 2>>"$2"; rm -f -- "$1" "$2"; shift 2; exec "$@"`

// Stream polling: the guest agent cannot wait for output, so the host
// asks, quickly while output flows and backing off while it does not.
const (
	streamPollMin = 10 * time.Millisecond
	streamPollMax = 200 * time.Millisecond
	streamRead    = 64 << 10
)

// ExecStream runs a program in the guest and passes its output to out as
// it comes.
func (s *Service) ExecStream(ctx context.Context, id string, req ExecRequest, out func(stream string, data []byte)) (res ExecResult, err error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	defer func() { s.announceExec(id, req, res, err) }()
	if err := req.Check(); err != nil {
		return ExecResult{}, err
	}
	mach, err := s.guestMachine(ctx, id)
	if err != nil {
		return ExecResult{}, err
	}
	start := time.Now()
	var cancel context.CancelFunc
	if req.Unbounded {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, req.Timeout+agentMargin)
	}
	defer cancel()
	ag := boundedAgent{mach.Agent()}
	tag := make([]byte, 8)
	rand.Read(tag)
	base := "/tmp/.warmdesk-exec-" + hex.EncodeToString(tag)
	streams := []*outStream{{name: "stdout", path: base + ".out"}, {name: "stderr", path: base + ".err"}}
	for _, o := range streams {
		if o.h, err = openGuest(ctx, ag, o.path, "w+"); err != nil {
			return ExecResult{}, err
		}
		defer closeGuest(ctx, ag, o.h)
	}
	path, args := execArgv(req)
	execArgs := map[string]any{"path": "/bin/sh", "arg": append([]string{"-c", streamScript, "sh", streams[0].path, streams[1].path, path}, args...)}
	if len(req.Stdin) > 0 {
		execArgs["input-data"] = base64.StdEncoding.EncodeToString(req.Stdin)
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := agentCall(ctx, ag, fileCallTimeout, "guest-exec", execArgs, &started); err != nil {
		return ExecResult{}, fmt.Errorf("desktop %s: exec %s: %w", id, req.Path, err)
	}
	if req.Started != nil {
		req.Started(started.PID)
	}
	wait := streamPollMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.killGroup(ctx, ag, started.PID)
			if req.Unbounded {
				return ExecResult{}, fmt.Errorf("desktop %s: exec %s: ended by its caller: %w", id, req.Path, ctx.Err())
			}
			return ExecResult{}, fmt.Errorf("%w: desktop %s: exec %s: no end seen within %s: %w", desktop.ErrUnavailable, id, req.Path, req.Timeout+agentMargin, ctx.Err())
		case <-timer.C:
		}
		got := false
		for _, o := range streams {
			n, err := o.drain(ctx, ag, req.MaxOutput, out)
			if err != nil {
				return ExecResult{}, fmt.Errorf("desktop %s: exec %s: %w", id, req.Path, err)
			}
			got = got || n > 0
		}
		var st struct {
			Exited   bool `json:"exited"`
			ExitCode int  `json:"exitcode"`
			Signal   int  `json:"signal"`
		}
		if err := agentCall(ctx, ag, fileCallTimeout, "guest-exec-status", map[string]int{"pid": started.PID}, &st); err != nil {
			return ExecResult{}, fmt.Errorf("desktop %s: exec %s: %w", id, req.Path, err)
		}
		if st.Exited {
			// Everything was written before the exit: read to the end.
			for _, o := range streams {
				for {
					n, err := o.drain(ctx, ag, req.MaxOutput, out)
					if err != nil {
						return ExecResult{}, fmt.Errorf("desktop %s: exec %s: %w", id, req.Path, err)
					}
					if n == 0 {
						break
					}
				}
			}
			res := desktop.ExecResult{ExitCode: st.ExitCode, Signal: st.Signal, Duration: time.Since(start),
				StdoutTruncated: streams[0].truncated, StderrTruncated: streams[1].truncated}
			return ExecResult{ExecResult: res, TimedOut: !req.Unbounded && timedOut(res, req.Timeout)}, nil
		}
		if got {
			wait = streamPollMin
		} else {
			wait = min(2*wait, streamPollMax)
		}
		timer.Reset(wait)
	}
}

// outStream is one output file of a streaming exec.
type outStream struct {
	name, path string
	h          int64
	sent       int
	truncated  bool
}

// drain reads what the file has gained and passes it on, up to max bytes
// in all; past that the output is reported truncated and no longer read.
func (o *outStream) drain(ctx context.Context, ag desktop.GuestAgent, max int, out func(string, []byte)) (int, error) {
	if o.truncated {
		return 0, nil
	}
	data, _, err := readGuest(ctx, ag, o.h, streamRead)
	if err != nil {
		return 0, err
	}
	if len(data) == 0 {
		return 0, nil
	}
	if o.sent+len(data) > max {
		data, o.truncated = data[:max-o.sent], true
	}
	o.sent += len(data)
	if len(data) > 0 {
		out(o.name, data)
	}
	return len(data), nil
}

// Signal sends a signal (a name kill(1) knows: TERM, KILL, INT...) to the
// process group a streaming exec started (its Started pid). A process that
// is gone is ErrNotFound.
func (s *Service) Signal(ctx context.Context, id string, pid int, signal string) error {
	if pid <= 1 || !signalName.MatchString(signal) {
		return fieldError("signal", "pid %d, signal %q: a program's pid and a signal name like TERM or KILL", pid, signal)
	}
	// Just after the start, the program may not lead its group yet (the
	// shell that starts it has not run timeout(1)): the pid alone then.
	script := `/bin/kill -"$1" -- -"$2" 2>/dev/null || exec /bin/kill -"$1" -- "$2"`
	res, err := s.exec(ctx, id, ExecRequest{Path: "/bin/sh", Args: []string{"-c", script, "sh", signal, strconv.Itoa(pid)}, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: desktop %s: no process group %d: %s", desktop.ErrNotFound, id, pid, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

var signalName = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,9}$`)

// killGroup ends the process group of a program whose caller gave up or
// whose deadline passed (timeout leads its own group, so the signal
// reaches the program's children): TERM, then KILL after killGrace if the
// group is still there, as timeout(1) does. It does not wait: the guest
// agent runs the kill on its own.
func (s *Service) killGroup(ctx context.Context, ag desktop.GuestAgent, pid int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// procps' kill: dash's own takes no "--" before a negative pid.
	script := `/bin/kill -TERM -- "-$1" 2>/dev/null || exit 0; sleep "$2"; /bin/kill -KILL -- "-$1" 2>/dev/null; exit 0`
	args := map[string]any{"path": "/bin/sh", "arg": []string{"-c", script, "sh", strconv.Itoa(pid), seconds(killGrace)}}
	if err := ag.Call(ctx, "guest-exec", args, nil); err != nil {
		s.log.Debug("end a guest program's process group", "pid", pid, "err", err)
	}
}
