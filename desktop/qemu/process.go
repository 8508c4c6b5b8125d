package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"golang.org/x/sys/unix"
)

// process is one QEMU process, started by us or found again after a restart.
// It notices the process's end at once: through Wait for a child, through a
// pidfd for a process a previous hostd started.
type process struct {
	pid       int
	startTime uint64 // from /proc/PID/stat, to tell a reused pid apart
	logPath   string

	// onExit, when set, runs once the process has ended, before done
	// closes; what it returns leads the exit reason.
	onExit func() string

	done    chan struct{}
	mu      sync.Mutex
	reason  string
	crashed bool
}

// spawnProcess starts QEMU detached from hostd's session, so it outlives a
// restart of hostd. Its output goes to logPath, never to a pipe hostd holds.
// onExit (may be nil) runs when it ends.
func spawnProcess(binary string, argv []string, extra []*os.File, logPath string, onExit func() string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open qemu log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(binary, argv...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = extra
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &process{pid: cmd.Process.Pid, logPath: logPath, onExit: onExit, done: make(chan struct{})}
	p.startTime, _ = procStartTime(p.pid)
	go func() {
		err := cmd.Wait()
		p.finish(describeExit(err), crashedBy(err))
	}()
	return p, nil
}

// attachProcess finds a QEMU process again by pid, checking that it is the
// same process (start time) and that it is QEMU running with our run dir.
// onExit (may be nil) runs when it ends.
func attachProcess(pid int, startTime uint64, runDir, logPath string, onExit func() string) (*process, error) {
	st, err := procStartTime(pid)
	if err != nil || st != startTime {
		return nil, fmt.Errorf("process %d is gone", pid)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(runDir)) {
		return nil, fmt.Errorf("process %d is not this desktop's QEMU", pid)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("watch process %d: %w", pid, err)
	}
	p := &process{pid: pid, startTime: startTime, logPath: logPath, onExit: onExit, done: make(chan struct{})}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		p.finish("exited while hostd was not its parent (exit status unknown)", false)
	}()
	return p, nil
}

func (p *process) finish(reason string, crashed bool) {
	if p.onExit != nil {
		if note := p.onExit(); note != "" {
			reason = note + " (" + reason + ")"
		}
	}
	p.mu.Lock()
	if tail := qemuvm.LogTail(p.logPath, 8); tail != "" {
		reason += "; last lines of its log:\n" + tail
	}
	p.reason = reason
	p.crashed = crashed
	p.mu.Unlock()
	close(p.done)
}

// Crashed reports, once done is closed, whether QEMU died of a fault of its
// own (a signal such as SIGSEGV that nobody sends it on purpose), as opposed
// to an exit, a quit or a kill.
func (p *process) Crashed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashed
}

// Reason says why the process ended, once done is closed.
func (p *process) Reason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason
}

// kill ends the process and waits for it, up to ctx's deadline.
func (p *process) kill(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill qemu %d: %w", p.pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("qemu %d did not exit after SIGKILL: %w", p.pid, ctx.Err())
	}
}

// waitExit waits for the process to end by itself (after QMP quit).
func (p *process) waitExit(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func describeExit(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exited with status 0"
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	default:
		return "ended: " + err.Error()
	}
}

// crashedBy reports whether a Wait error says the process died of a fault.
func crashedBy(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGABRT, syscall.SIGILL, syscall.SIGFPE:
		return true
	}
	return false
}

// procStartTime reads field 22 of /proc/PID/stat.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStartTime(string(data))
}

// parseStartTime takes the start time out of a /proc/PID/stat line. The
// command name may hold spaces and parentheses, so fields count from the
// last ')'.
func parseStartTime(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(stat[i+1:])
	// Field 3 (state) is fields[0]; starttime is field 22.
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// listenUnix binds a unix socket for QEMU to inherit (its QMP monitor), so
// hostd can connect at once and read the greeting when QEMU is ready,
// instead of polling for the socket to appear.
func listenUnix(path string) (*os.File, error) {
	os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// The path must outlive this listener: QEMU keeps serving on it and a
	// restarted hostd reconnects through it.
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return f, nil
}

// dialUnix connects to a unix socket of QEMU's.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// deadline returns ctx bounded by d.
func deadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
