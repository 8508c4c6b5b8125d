package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// Typing loses nothing when the guest is slow to read its keyboard or
// fresh from its restore. QEMU's PS/2 queue holds 16 bytes (about eight
// keystrokes) and drops what comes on top: with the vCPU threads (not
// QEMU's main loop, which takes the input) given 5 ms of CPU every 100 ms
// through a CPU quota, the harshest form of a busy host, every typed line
// lost keys, until qemuvm's KeyGate held each keyboard frame until the
// guest had read the last. Typed right after a create, "echo ready >
// /tmp/ready" arrived as "/tmp/ready" or "/ready": keys typed while the
// guest's clock jumps from the template's are lost above its kernel, so
// input waits for the guest's own clock and identity (WaitIdentity).
func TestTypingLandsOnAFreshAndAStarvedGuest(t *testing.T) {
	s := startActionStack(t)
	mach := s.typedReady(t)
	t.Cleanup(func() {
		if t.Failed() {
			s.logGuestInputLoss(t)
		}
	})
	// The guest's kernel queues at most 64 input events (about ten
	// keystrokes) for X and drops them all when X falls further behind, as
	// X's input thread can on a guest this starved; the session makes that
	// thread real-time so it reads each event when it comes.
	if out := s.shell(t, `for t in /proc/$(pidof Xorg)/task/*; do [ "$(cat $t/comm)" = InputThread ] && chrt -p ${t##*/}; done`); !strings.Contains(out.Stdout, "SCHED_FIFO") {
		t.Errorf("X's input thread is not real-time in the guest: chrt says %q (stderr %q)", out.Stdout, out.Stderr)
	}
	const lines = 2
	text := "abcdefghijklmnopqrstuvwxyz0123456789"
	func() {
		restore := starveVCPUs(t, mach.Pid(), 5000, 100000)
		defer restore()
		for i := range lines {
			s.actions(t, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindType, Text: fmt.Sprintf("echo %s > /tmp/typed-%d\n", text, i)}}})
		}
	}()
	for i := range lines {
		s.waitFile(t, fmt.Sprintf("/tmp/typed-%d", i), text+"\n")
	}
}

// logGuestInputLoss logs what the guest's X server said of input it lost
// or read late (libinput's SYN_DROPPED and lag lines), which tells keys
// lost above the guest's kernel from keys lost in QEMU's queue.
func (s *actionStack) logGuestInputLoss(t *testing.T) {
	// Xorg's log file has libinput's info lines (SYN_DROPPED); its
	// stderr, only the errors.
	for _, path := range []string{"/run/Xorg.0.log", "/run/Xorg.out"} {
		var buf bytes.Buffer
		if _, err := s.c.ReadFile(s.ctx(t), s.id, path, &buf); err != nil {
			t.Logf("read the guest's %s: %v", path, err)
			continue
		}
		for line := range strings.Lines(buf.String()) {
			if strings.Contains(line, "SYN_DROPPED") || strings.Contains(line, "lagging") || strings.Contains(line, "overflow") {
				t.Logf("guest %s: %s", path, strings.TrimSpace(line))
			}
		}
	}
}

// starveVCPUs moves the vCPU threads of QEMU process pid into a child of
// their cgroup v1 cpu group with a quota of quota µs every period µs, and
// returns what moves them back.
func starveVCPUs(t *testing.T, pid, quota, period int) (restore func()) {
	t.Helper()
	tids := vcpuThreads(t, pid)
	parent := cpuCgroupDir(t, pid)
	if _, err := os.Stat(filepath.Join(parent, "cpu.cfs_quota_us")); err != nil {
		t.Fatalf("no cgroup v1 cpu controller for QEMU at %s: %v", parent, err)
	}
	dir := filepath.Join(parent, "starved")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0) }
	undo := func() {
		var errs []error
		for _, tid := range tids {
			errs = append(errs, os.WriteFile(filepath.Join(parent, "tasks"), []byte(tid), 0))
		}
		errs = append(errs, os.Remove(dir))
		if err := errors.Join(errs...); err != nil {
			t.Errorf("give the vCPUs their CPU back: %v", err)
		}
	}
	if err := errors.Join(write("cpu.cfs_period_us", fmt.Sprint(period)), write("cpu.cfs_quota_us", fmt.Sprint(quota))); err != nil {
		os.Remove(dir)
		t.Fatal(err)
	}
	for _, tid := range tids {
		if err := write("tasks", tid); err != nil {
			undo()
			t.Fatalf("move vCPU thread %s: %v", tid, err)
		}
	}
	return undo
}

func vcpuThreads(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []string
	for _, task := range tasks {
		if comm, err := os.ReadFile(filepath.Join(task, "comm")); err == nil && qemuvm.IsVCPUThread(string(comm)) {
			tids = append(tids, filepath.Base(task))
		}
	}
	if len(tids) == 0 {
		t.Fatalf("QEMU %d has no vCPU threads", pid)
	}
	return tids
}

// cpuCgroupDir is the directory of a process's cgroup v1 cpu group,
// through confine's parsers of /proc/PID/cgroup and the mount table.
func cpuCgroupDir(t *testing.T, pid int) string {
	t.Helper()
	procCgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	groups, _, err := confine.ParseProcCgroup(string(procCgroup))
	if err != nil {
		t.Fatal(err)
	}
	mounts, _, err := confine.ParseCgroupMounts(string(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	group, inGroup := groups["cpu"]
	mnt, mounted := mounts["cpu"]
	if !inGroup || !mounted {
		t.Fatalf("QEMU %d is in no cgroup v1 cpu group (cgroup v2 hosts are not covered by this test)", pid)
	}
	return filepath.Join(mnt, group)
}

// A QEMU stopped (SIGSTOP) for 3 s in the middle of a typing batch, as a
// host under memory or CPU pressure can stall a process: the batch
// completes late and its line arrives once and whole, nothing typed twice
// or lost.
func TestBatchOutlivesAStoppedQEMU(t *testing.T) {
	s := startActionStack(t)
	mach := s.typedReady(t)
	ctx := s.ctx(t)
	before := s.changeCounter(ctx, t)
	// Long enough to be typing still when the first keys show (the batch
	// ending within the stall fails the test below).
	text := strings.Repeat("abcdefghijklmnopqrstuvwxyz", 10)
	type answer struct {
		took time.Duration
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		_, err := s.c.Actions(ctx, s.id, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindType, Text: "echo " + text + " >> /tmp/stalled\n"}}})
		done <- answer{time.Since(start), err}
	}()
	// Stopped once the batch is under way: its first keys are on the screen.
	if !testenv.Poll(30*time.Second, 10*time.Millisecond, 50*time.Millisecond, func() bool { return s.changeCounter(ctx, t) > before }) {
		t.Fatal("the batch's first keys never showed")
	}
	const stall = 3 * time.Second
	if err := syscall.Kill(mach.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resume := time.AfterFunc(stall, func() { syscall.Kill(mach.Pid(), syscall.SIGCONT) })
	defer func() {
		resume.Stop()
		syscall.Kill(mach.Pid(), syscall.SIGCONT)
	}()
	a := <-done
	if a.err != nil {
		t.Fatalf("the batch across the stall: %v", a.err)
	}
	if time.Since(stopped) < stall {
		t.Fatalf("the batch ended %s after QEMU stopped, within the stall: it was not stopped mid-batch", time.Since(stopped))
	}
	t.Logf("the batch took %s across a %s stall", a.took.Round(time.Millisecond), stall)
	s.waitFile(t, "/tmp/stalled", text+"\n")
}

// typedReady types a command into the fresh desktop's xterm, waits for
// its file, and returns the desktop's machine.
func (s *actionStack) typedReady(t *testing.T) desktop.Machine {
	t.Helper()
	s.actions(t, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindType, Text: "echo ready > /tmp/ready\n"}}})
	s.waitFile(t, "/tmp/ready", "ready\n")
	mach, _, err := s.mgr.Machine(s.ctx(t), s.id, desktop.WaitNone)
	if err != nil {
		t.Fatal(err)
	}
	return mach
}

// changeCounter is the desktop screen's change counter now.
func (s *actionStack) changeCounter(ctx context.Context, t *testing.T) uint64 {
	t.Helper()
	_, h, err := s.c.Screenshot(ctx, s.id, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(h.Get("X-Change-Counter"), 10, 64)
	if err != nil {
		t.Fatalf("X-Change-Counter %q: %v", h.Get("X-Change-Counter"), err)
	}
	return n
}
