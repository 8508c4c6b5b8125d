// Package faults kills hostd at every named point of create, snapshot,
// fork, hibernate and wake (desktop.FaultPoints), starts it again, and
// checks what recovery left: no QEMU process or run directory without a
// record, every running desktop answering a screenshot and input, every
// hibernated desktop waking. hostd runs as a child process: this test
// binary re-executed as `hostd serve`.
package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/cli"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// runAsHostd makes this binary `hostd` when set: the crash tests start it
// as a child, which a kill point may end.
const runAsHostd = "WARMDESK_TEST_RUN_HOSTD"

func TestMain(m *testing.M) {
	if os.Getenv(runAsHostd) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// host is one hostd state directory and the process serving it.
type host struct {
	t        *testing.T
	driver   string
	state    string
	runDir   string
	snapshot string
	cmd      *exec.Cmd
	exited   chan struct{}
	log      string
	c        *client.Client
}

func newHost(t *testing.T, driver string) *host {
	baked := testenv.Snapshot(t, "minimal")
	h := &host{t: t, driver: driver, state: testenv.DataDir(t), runDir: testenv.RunDir(t), snapshot: baked.Snapshot.Name}
	snaps := filepath.Join(h.state, "snapshots")
	if err := os.MkdirAll(snaps, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(baked.Snapshot.Dir, filepath.Join(snaps, baked.Snapshot.Name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cleanup)
	return h
}

// start runs hostd, with the kill point fault armed when not empty, and
// waits until it answers.
func (h *host) start(fault string) {
	t := h.t
	t.Helper()
	addrFile := filepath.Join(h.state, "address")
	os.Remove(addrFile)
	h.log = filepath.Join(h.state, fmt.Sprintf("hostd-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	h.cmd = exec.Command(os.Args[0], "serve", "--state-dir", h.state, "--run-dir", h.runDir,
		"--cache-dir", testenv.CacheDir(), "--listen", "127.0.0.1:0", "--accel", "tcg", "--pool", "0", "--driver", h.driver)
	h.cmd.Env = append(os.Environ(), runAsHostd+"=1", desktop.FaultEnv+"="+fault)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(h.cmd, h.exited)
	var addr []byte
	if !testenv.Poll(time.Minute, 10*time.Millisecond, 200*time.Millisecond, func() bool {
		select {
		case <-h.exited:
			return true
		default:
		}
		addr, err = os.ReadFile(addrFile)
		return err == nil
	}) || err != nil {
		h.fail("hostd did not start: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(h.state, "token"))
	if err != nil {
		t.Fatal(err)
	}
	h.c = client.New("http://"+strings.TrimSpace(string(addr)), strings.TrimSpace(string(token)))
}

// fail ends the test with hostd's log.
func (h *host) fail(format string, args ...any) {
	h.t.Helper()
	out, _ := os.ReadFile(h.log)
	h.t.Fatalf(format+"\nhostd's log:\n%s", append(args, out)...)
}

// killedAtPoint waits for hostd to end itself with SIGKILL.
func (h *host) killedAtPoint(ctx context.Context) {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-ctx.Done():
		h.fail("hostd never reached its kill point")
	}
	ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		h.fail("hostd ended with %v, not by SIGKILL at its kill point", h.cmd.ProcessState)
	}
}

// stop deletes every desktop and ends hostd with SIGTERM.
func (h *host) stop(ctx context.Context) {
	if h.cmd == nil {
		return
	}
	select {
	case <-h.exited:
	default:
		if ds, err := h.c.Desktops(ctx); err == nil {
			for _, d := range ds {
				h.c.DeleteDesktop(ctx, d.ID)
			}
		}
		h.cmd.Process.Signal(syscall.SIGTERM)
		<-h.exited
	}
	h.cmd = nil
}

// cleanup ends whatever a failed test left: hostd, and QEMU processes
// under its run directory.
func (h *host) cleanup() {
	if h.cmd != nil {
		h.cmd.Process.Kill()
		<-h.exited
	}
	for _, pid := range testenv.QEMUsUnder(h.runDir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// point is one kill point: what to do first, the operation it interrupts,
// and what recovery should make of it.
type point struct {
	name    string
	prepare func(ctx context.Context, h *host) string // returns a desktop id, or ""
	op      func(ctx context.Context, h *host, id string) error
	// want is the state of the one desktop after recovery ("" for none).
	want string
	// snapshot is the name (or, ending in "-", the prefix) of the one
	// snapshot besides the base that should exist after, used by the
	// desktop; "" for none.
	snapshot string
}

func create(ctx context.Context, h *host) string {
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: h.snapshot})
	if err != nil {
		h.fail("create: %v", err)
	}
	return d.ID
}

func createHibernated(ctx context.Context, h *host) string {
	id := create(ctx, h)
	if _, err := h.c.Op(ctx, id, "hibernate"); err != nil {
		h.fail("hibernate: %v", err)
	}
	return id
}

func points() []point {
	none := func(context.Context, *host) string { return "" }
	doCreate := func(ctx context.Context, h *host, _ string) error {
		_, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: h.snapshot})
		return err
	}
	snapshot := func(ctx context.Context, h *host, id string) error {
		_, err := h.c.Snapshot(ctx, id, "kept")
		return err
	}
	fork := func(ctx context.Context, h *host, id string) error {
		_, err := h.c.Fork(ctx, id, 1)
		return err
	}
	op := func(name string) func(ctx context.Context, h *host, id string) error {
		return func(ctx context.Context, h *host, id string) error {
			_, err := h.c.Op(ctx, id, name)
			return err
		}
	}
	return []point{
		{desktop.FaultCreateRecorded, none, doCreate, "", ""},
		{desktop.FaultCreateRestored, none, doCreate, "", ""},
		{desktop.FaultSnapshotSourceStopped, create, snapshot, "running", ""},
		{desktop.FaultSnapshotMemoryCopied, create, snapshot, "running", ""},
		{desktop.FaultSnapshotCommitted, create, snapshot, "running", "kept"},
		// The fork's template stays while the source lives: the source's
		// disk now layers on it, as after any fork.
		{desktop.FaultForkSnapshotted, create, fork, "running", "fork-"},
		// The migration is cancelled at the restart: the guest runs on.
		{desktop.FaultHibernateMigrating, create, op("hibernate"), "running", ""},
		{desktop.FaultHibernateStateWritten, create, op("hibernate"), "hibernated", ""},
		{desktop.FaultHibernateSaved, create, op("hibernate"), "hibernated", ""},
		{desktop.FaultWakeRestored, createHibernated, op("wake"), "hibernated", ""},
	}
}

// TestKillPoints kills hostd at each kill point and checks recovery. The
// table it logs is the one in docs/SECURITY.md.
func TestKillPoints(t *testing.T) { testKillPoints(t, "qemu") }

// TestKillPointsLibvirt is TestKillPoints with hostd on the libvirt
// driver.
func TestKillPointsLibvirt(t *testing.T) {
	testenv.SkipShort(t)
	needLibvirtd(t)
	testKillPoints(t, "libvirt")
}

// needLibvirtd skips the test (fails it under CI=true) when no libvirtd
// runs: scripts/libvirtd --test starts one.
func needLibvirtd(t *testing.T) {
	t.Helper()
	testenv.UsesLibvirtd(t)
	if out, err := exec.Command("../../scripts/libvirtd", "--status").CombinedOutput(); err != nil {
		if testenv.InCI() {
			t.Fatalf("libvirtd is not running: %s", out)
		}
		t.Skipf("libvirtd is not running (scripts/libvirtd --test starts one): %s", out)
	}
}

func testKillPoints(t *testing.T, driver string) {
	testenv.SkipShort(t)
	ps := points()
	var covered []string
	for _, p := range ps {
		covered = append(covered, p.name)
	}
	if !slices.Equal(covered, desktop.FaultPoints) {
		t.Fatalf("the test covers %v, the kill points are %v", covered, desktop.FaultPoints)
	}
	var table []string
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			h := newHost(t, driver)
			h.start(p.name)
			id := p.prepare(ctx, h)
			if err := p.op(ctx, h, id); err == nil {
				h.fail("the operation at %s succeeded: hostd should have died", p.name)
			}
			h.killedAtPoint(ctx)
			start := time.Now()
			h.start("")
			outcome := h.checkRecovered(ctx, p)
			table = append(table, fmt.Sprintf("| `%s` | %s | %s |", p.name, outcome, time.Since(start).Round(100*time.Millisecond)))
			h.stop(ctx)
			if left := testenv.QEMUsUnder(h.runDir); len(left) > 0 {
				t.Errorf("QEMU processes %v remain after every desktop was deleted", left)
			}
		})
	}
	t.Logf("kill point | after restart | restart to checked\n%s", strings.Join(table, "\n"))
}

// checkRecovered asserts the invariants after a restart, and what this
// point should leave; it returns the outcome for the table.
func (h *host) checkRecovered(ctx context.Context, p point) string {
	t := h.t
	t.Helper()
	ds, err := h.c.Desktops(ctx)
	if err != nil {
		h.fail("list desktops: %v", err)
	}
	var outcome []string
	switch {
	case p.want == "" && len(ds) != 0:
		h.fail("after %s: desktops %+v, want none", p.name, ds)
	case p.want != "" && (len(ds) != 1 || ds[0].State != p.want):
		h.fail("after %s: desktops %+v, want one %s", p.name, ds, p.want)
	case p.want == "":
		outcome = append(outcome, "no desktop (the half-made one removed)")
	}
	h.checkNoOrphans(ctx, ds)
	for _, d := range ds {
		if d.State == "hibernated" {
			if _, err := h.c.Op(ctx, d.ID, "wake"); err != nil {
				h.fail("wake %s after %s: %v", d.ID, p.name, err)
			}
			outcome = append(outcome, "hibernated, wakes")
		} else {
			outcome = append(outcome, d.State)
		}
		h.checkAnswers(ctx, d.ID)
	}
	snaps, err := h.c.Snapshots(ctx)
	if err != nil {
		h.fail("list snapshots: %v", err)
	}
	var extra []api.Snapshot
	for _, s := range snaps {
		if s.Name != h.snapshot {
			extra = append(extra, s)
		}
	}
	switch {
	case p.snapshot == "" && len(extra) != 0:
		h.fail("after %s: snapshots %+v besides the base, want none", p.name, extra)
	case p.snapshot != "" && (len(extra) != 1 || !(extra[0].Name == p.snapshot || strings.HasSuffix(p.snapshot, "-") && strings.HasPrefix(extra[0].Name, p.snapshot))):
		h.fail("after %s: snapshots %+v besides the base, want one %s", p.name, extra, p.snapshot)
	case p.snapshot != "" && (len(ds) != 1 || !slices.Contains(extra[0].Users, ds[0].ID)):
		h.fail("snapshot %s is used by %v, want the desktop it was made of", extra[0].Name, extra[0].Users)
	case p.snapshot != "":
		outcome = append(outcome, "its snapshot "+extra[0].Name+" kept, in use by it")
	case strings.HasPrefix(p.name, "snapshot.") || strings.HasPrefix(p.name, "fork."):
		outcome = append(outcome, "no snapshot, draft or template QEMU left")
	}
	h.checkNoOrphans(ctx, ds)
	return strings.Join(outcome, "; ")
}

// checkNoOrphans asserts that every QEMU process and run directory under
// hostd's run directory belongs to a desktop whose record says running or
// paused.
func (h *host) checkNoOrphans(ctx context.Context, ds []api.Desktop) {
	h.t.Helper()
	live := map[string]bool{}
	if fresh, err := h.c.Desktops(ctx); err == nil {
		ds = fresh
	}
	for _, d := range ds {
		if d.State == "running" || d.State == "paused" {
			live[d.ID] = true
		}
	}
	entries, err := os.ReadDir(h.runDir)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !live[e.Name()] {
			h.fail("run directory %s has no running desktop", e.Name())
		}
	}
	for _, pid := range testenv.QEMUsUnder(h.runDir) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cmdline"))
		owned := false
		for id := range live {
			owned = owned || strings.Contains(string(cmdline), filepath.Join(h.runDir, id)+"/")
		}
		if !owned {
			h.fail("QEMU %d has no running desktop: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// checkAnswers asserts that a desktop answers a screenshot and input.
func (h *host) checkAnswers(ctx context.Context, id string) {
	h.t.Helper()
	if _, _, err := h.c.Screenshot(ctx, id, nil, false); err != nil {
		h.fail("screenshot of %s: %v", id, err)
	}
	batch := input.Batch{{Kind: input.KindMove, At: &input.Point{X: 40, Y: 40}}}
	if _, err := h.c.Actions(ctx, id, api.ActionsRequest{Actions: batch}); err != nil {
		var apiErr *client.Error
		errors.As(err, &apiErr)
		h.fail("input to %s: %v (%+v)", id, err, apiErr)
	}
}

// TestKillWithVolumeAttached: hostd killed with SIGKILL while a desktop
// holds a volume read-write; the next hostd finds the desktop with its
// volume mounted, readable and writable, and still refuses a second
// writer.
func TestKillWithVolumeAttached(t *testing.T) {
	testenv.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h := newHost(t, "qemu")
	h.start("")
	if _, err := h.c.CreateVolume(ctx, api.CreateVolume{Name: "ws", SizeMiB: 32}); err != nil {
		h.fail("create volume: %v", err)
	}
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: h.snapshot, Volumes: []api.VolumeMount{{Name: "ws", Mount: "/workspace"}}})
	if err != nil {
		h.fail("create: %v", err)
	}
	shell := func(line string) string {
		res, err := h.c.Exec(ctx, d.ID, api.ExecRequest{Shell: line, Timeout: api.Duration(time.Minute)})
		if err != nil || res.ExitCode != 0 {
			h.fail("%q: %+v, %v", line, res, err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	shell("echo before > /workspace/f")
	h.cmd.Process.Kill()
	<-h.exited
	h.cmd = nil
	h.start("")
	got, err := h.c.Desktop(ctx, d.ID)
	if err != nil || got.State != "running" || len(got.Volumes) != 1 {
		h.fail("after the kill: %+v, %v", got, err)
	}
	if out := shell("echo after >> /workspace/f && cat /workspace/f"); out != "before\nafter" {
		h.fail("after the kill the volume reads %q", out)
	}
	if _, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: h.snapshot, Volumes: []api.VolumeMount{{Name: "ws", Mount: "/w"}}}); err == nil {
		h.fail("a second writer was let in after the restart")
	}
	h.stop(ctx)
}

// TestKillDuringHibernate kills hostd with SIGKILL 100 to 300 ms after a
// hibernate was asked for, WARMDESK_HIBERNATE_KILLS times (default 5; the
// table in docs/SECURITY.md is of 20), wherever in the hibernation that
// lands, and checks that each desktop is found either hibernated (and
// wakes) or running with its CPUs running: it answers input and exec, and
// its guest clock moves.
func TestKillDuringHibernate(t *testing.T) {
	testenv.SkipShort(t)
	kills := 5
	if n, err := strconv.Atoi(os.Getenv("WARMDESK_HIBERNATE_KILLS")); err == nil && n > 0 {
		kills = n
	}
	h := newHost(t, "qemu")
	outcomes := map[string]int{}
	for i := range kills {
		delay := 100*time.Millisecond + time.Duration(i)*200*time.Millisecond/time.Duration(max(kills-1, 1))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		h.start("")
		id := create(ctx, h)
		hibernated := make(chan error, 1)
		go func() {
			_, err := h.c.Op(ctx, id, "hibernate")
			hibernated <- err
		}()
		// The delay is what the experiment varies: where in the
		// hibernation the kill lands.
		killer := time.AfterFunc(delay, func() { h.cmd.Process.Kill() })
		<-h.exited
		killer.Stop()
		<-hibernated
		h.cmd = nil
		h.start("")
		d, err := h.c.Desktop(ctx, id)
		if err != nil {
			h.fail("kill %d (%s after the hibernate): %v", i, delay, err)
		}
		switch d.State {
		case "hibernated":
			if _, err := h.c.Op(ctx, id, "wake"); err != nil {
				h.fail("kill %d (%s): wake: %v", i, delay, err)
			}
		case "running":
		default:
			h.fail("kill %d (%s): the desktop is %s (%s), want running or hibernated", i, delay, d.State, d.Reason)
		}
		outcomes[d.State]++
		h.checkNoOrphans(ctx, []api.Desktop{d})
		h.checkAnswers(ctx, id)
		h.checkGuestRuns(ctx, id)
		h.stop(ctx)
		cancel()
	}
	t.Logf("%d kills 100-300 ms after a hibernate: %d found running, %d hibernated (woken); every one answered input and exec, its clock moving", kills, outcomes["running"], outcomes["hibernated"])
}

// checkGuestRuns asserts that a desktop's guest runs: an exec answers
// within its own deadline, twice, and the guest's clock moved between.
func (h *host) checkGuestRuns(ctx context.Context, id string) {
	h.t.Helper()
	uptime := func() float64 {
		res, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: "cut -d' ' -f1 /proc/uptime", Timeout: api.Duration(time.Minute)})
		if err != nil || res.ExitCode != 0 {
			h.fail("exec in %s: %+v, %v", id, res, err)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(res.Stdout), 64)
		if err != nil {
			h.fail("uptime of %s: %q", id, res.Stdout)
		}
		return f
	}
	first := uptime()
	if second := uptime(); second <= first {
		h.fail("the guest's clock of %s stands still: %v then %v", id, first, second)
	}
}
