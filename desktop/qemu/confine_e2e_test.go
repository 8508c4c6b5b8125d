package qemu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// confined is what a machine's record says of its confinement.
type confined struct {
	UID     uint32   `json:"uid"`
	Cgroup  []string `json:"cgroup"`
	Disk    string   `json:"disk"`
	DataDir string   `json:"data_dir"`
}

func recordOf(t *testing.T, m desktop.Machine) confined {
	t.Helper()
	var c confined
	if err := json.Unmarshal(m.Record(), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// confinedRig is a QEMU driver on the minimal snapshot, closed with the
// test, and a context bounding the test.
type confinedRig struct {
	t     *testing.T
	ctx   context.Context
	d     *qemu.Driver
	baked testenv.Baked
}

func newConfinedRig(t *testing.T) *confinedRig {
	t.Helper()
	baked := testenv.Snapshot(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	d, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return &confinedRig{t: t, ctx: ctx, d: d, baked: baked}
}

// restore starts a desktop from the snapshot (or wakes one), destroyed
// with the test.
func (r *confinedRig) restore(spec desktop.RestoreSpec) desktop.Machine {
	r.t.Helper()
	spec.Snapshot = r.baked.Snapshot
	m, err := r.d.Restore(r.ctx, spec)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { m.Destroy(context.WithoutCancel(r.ctx)) })
	return m
}

// Each desktop's QEMU runs as a user of its own, without capabilities,
// in a cgroup of its own with the limits set, and cannot open another
// desktop's disk; hostd stays out of the desktops' cgroups.
func TestQEMURunsConfined(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("confinement needs root")
	}
	r := newConfinedRig(t)
	ctx := r.ctx
	var ms []desktop.Machine
	for i := range 2 {
		ms = append(ms, r.restore(desktop.RestoreSpec{ID: "d-confine" + strconv.Itoa(i)}))
	}
	a, b := recordOf(t, ms[0]), recordOf(t, ms[1])
	if a.UID == 0 || b.UID == 0 || a.UID == b.UID {
		t.Fatalf("QEMU user ids %d and %d: want two distinct non-root ids", a.UID, b.UID)
	}
	for i, m := range ms {
		rec := recordOf(t, m)
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.Pid()), "status"))
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatUint(uint64(rec.UID), 10)
		for _, line := range []string{
			"Uid:\t" + want + "\t" + want + "\t" + want + "\t" + want,
			"Gid:\t" + want + "\t" + want + "\t" + want + "\t" + want,
			"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1",
		} {
			if !strings.Contains(string(status), line+"\n") {
				t.Errorf("desktop %d: /proc/PID/status lacks %q:\n%s", i, line, status)
			}
		}
		checkCgroup(t, m.Pid(), rec)
		checkDrivenShare(t, m, rec)
		// Its directories stay root's, passable only; QEMU holds the
		// lease on its id.
		for _, dir := range []string{filepath.Dir(rec.Disk)} {
			fi, err := os.Stat(dir)
			if own, oerr := qemuvm.OwnerOf(dir); err != nil || oerr != nil || own != qemuvm.Root || fi.Mode().Perm() != 0o711 {
				t.Errorf("desktop %d: %s is %v owned by %v (%v %v); want root's, 0711", i, dir, fi.Mode(), own, err, oerr)
			}
		}
		if !holdsLease(m.Pid(), rec.UID) {
			t.Errorf("desktop %d: QEMU holds no descriptor of its id's lease", i)
		}
		// A screendump: QEMU, as the machine's user, writes the file.
		if _, err := m.Screendump(ctx); err != nil {
			t.Errorf("desktop %d: screendump as the machine's user: %v", i, err)
		}
	}
	// As desktop a's user: its own disk opens, b's does not.
	if out, err := testenv.AsUser(a.UID, "head", "-c", "4", a.Disk); err != nil || out != "QFI\xfb" {
		t.Fatalf("desktop a's user reading its own disk: %q, %v", out, err)
	}
	out, err := testenv.AsUser(a.UID, "head", "-c", "4", b.Disk)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("desktop a's user reading desktop b's disk: %q, %v; want permission denied", out, err)
	}

	// Destroyed: its cgroup goes, and its id is free again.
	if !leaseHeld(t, a.UID) {
		t.Fatalf("id %d of a running desktop can be leased", a.UID)
	}
	if err := ms[0].Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if leaseHeld(t, a.UID) {
		t.Errorf("id %d is still held after its desktop was destroyed", a.UID)
	}
	for _, dir := range a.Cgroup {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s remains after Destroy (%v)", dir, err)
		}
	}

	// Hibernated: b's files go back to root, so a later machine given b's
	// id cannot reach them; woken, they belong to its new id.
	raw, err := ms[1].Hibernate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{b.DataDir, b.Disk} {
		if own, err := qemuvm.OwnerOf(p); err != nil || own != qemuvm.Root {
			t.Errorf("%s of a hibernated desktop: owner %v, %v; want root", p, own, err)
		}
	}
	woken := r.restore(desktop.RestoreSpec{ID: "d-confine1", Hibernated: raw})
	w := recordOf(t, woken)
	if own, err := qemuvm.OwnerOf(w.Disk); err != nil || own.UID != w.UID || w.UID == 0 {
		t.Errorf("woken desktop's disk owner %v, %v; want its new id %d", own, err, w.UID)
	}
	checkCgroup(t, woken.Pid(), w)
}

// checkDrivenShare checks that a driven machine gets four times its
// default CPU share in its cgroup, and the default back after.
func checkDrivenShare(t *testing.T, m desktop.Machine, rec confined) {
	t.Helper()
	p, ok := m.(desktop.Prioritizer)
	if !ok {
		t.Fatalf("%T cannot change its CPU share", m)
	}
	for _, c := range []struct {
		driven bool
		weight int
	}{{true, 800}, {false, 200}} {
		if err := p.SetDriven(c.driven); err != nil {
			t.Fatal(err)
		}
		checkShare(t, rec, c.weight, fmt.Sprintf("driven %v", c.driven))
	}
}

// checkShare checks a machine's CPU share in its cgroup: weight in v2,
// the shares of that weight in v1.
func checkShare(t *testing.T, rec confined, weight int, when string) {
	t.Helper()
	file, want := filepath.Join(rec.Cgroup[0], "cpu.weight"), strconv.Itoa(weight)
	if len(rec.Cgroup) > 1 {
		file, want = filepath.Join(rec.Cgroup[1], "cpu.shares"), strconv.Itoa(confine.SharesOfWeight(weight))
	}
	if got, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("%s: %s is %q (%v), want %s", when, file, got, err, want)
	}
}

// A machine booted for a bake runs at an idle desktop's CPU share, a
// quarter of a driven one's, so a bake on a serving host yields to the
// desktops in use and still makes progress.
func TestBakeMachineRunsAtAnIdleDesktopsShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("confinement needs root")
	}
	r := newConfinedRig(t)
	m, err := r.d.Boot(r.ctx, desktop.BootSpec{Name: "share", Image: r.baked.Image.Boot(), CPUs: 2, MemoryMiB: 1024, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.WithoutCancel(r.ctx))
	rec := recordOf(t, m)
	if len(rec.Cgroup) == 0 {
		t.Fatal("the baking machine has no cgroup")
	}
	checkShare(t, rec, qemuvm.CPUWeight(2), "baking")
}

// checkCgroup checks that pid sits in the machine's own cgroup with its
// limits, and that hostd does not.
func checkCgroup(t *testing.T, pid int, rec confined) {
	t.Helper()
	if len(rec.Cgroup) == 0 {
		t.Fatal("the machine has no cgroup")
	}
	for _, dir := range rec.Cgroup {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		members := strings.Fields(string(procs))
		if !contains(members, strconv.Itoa(pid)) || contains(members, strconv.Itoa(os.Getpid())) {
			t.Errorf("%s holds %v: want QEMU %d and not hostd %d", dir, members, pid, os.Getpid())
		}
	}
	limits := map[string]string{}
	if len(rec.Cgroup) == 1 {
		limits[filepath.Join(rec.Cgroup[0], "pids.max")] = "512"
		limits[filepath.Join(rec.Cgroup[0], "memory.max")] = strconv.Itoa((1024 + 1536) << 20)
	} else {
		limits[filepath.Join(rec.Cgroup[0], "memory.limit_in_bytes")] = strconv.Itoa((1024 + 1536) << 20)
		limits[filepath.Join(rec.Cgroup[1], "cpu.shares")] = strconv.Itoa(2 * 1024)
		limits[filepath.Join(rec.Cgroup[2], "pids.max")] = "512"
		if peak, err := os.ReadFile(filepath.Join(rec.Cgroup[0], "memory.max_usage_in_bytes")); err == nil {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(peak)), 10, 64)
			t.Logf("cgroup memory peak so far: %d MiB", n>>20)
		}
	}
	for file, want := range limits {
		got, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q, %v; want %s", file, got, err, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A guest writing until its disk bound pauses itself, saying disk_full,
// with its overlay on the host no larger than the bound plus a small
// slack: the writes in flight when QEMU reported the crossing.
func TestDiskBoundPausesTheDesktop(t *testing.T) {
	r := newConfinedRig(t)
	ctx := r.ctx
	const bound = 64
	m := r.restore(desktop.RestoreSpec{ID: "d-diskbound", DiskMiB: bound})
	rec := recordOf(t, m)
	stopFill := desktoptest.FillPastDiskBound(ctx, t, m, rec.Disk, bound)
	stopFill()
}

// A guest printing without end on its serial console leaves at most two
// capped log files on the host.
func TestConsoleLogIsCapped(t *testing.T) {
	r := newConfinedRig(t)
	ctx := r.ctx
	m := r.restore(desktop.RestoreSpec{ID: "d-console"})
	const written = 5 * qemuvm.ConsoleLogMax / 2
	res, err := desktop.Shell(ctx, m.Agent(), "head -c "+strconv.Itoa(written)+" /dev/zero | tr '\\0' x | fold -w 99 > /dev/ttyS0; echo end > /dev/ttyS0", 4*time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("printing on the console: %+v, %v", res, err)
	}
	log := filepath.Join(recordOf(t, m).DataDir, "console.log")
	if !testenv.Poll(30*time.Second, 10*time.Millisecond, time.Second, func() bool {
		b, err := os.ReadFile(log)
		return err == nil && strings.HasSuffix(string(b), "end\n")
	}) {
		t.Fatal("the console's last line never reached its log")
	}
	total := int64(0)
	for _, p := range []string{log, log + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > qemuvm.ConsoleLogMax {
			t.Errorf("%s holds %d bytes, past the cap of %d", p, fi.Size(), qemuvm.ConsoleLogMax)
		}
		total += fi.Size()
	}
	t.Logf("the guest printed %d bytes; the host keeps %d", written, total)
}

// holdsLease says whether process pid has its id's lease file open.
func holdsLease(pid int, uid uint32) bool {
	want := filepath.Join(confine.DefaultLeaseDir, strconv.FormatUint(uint64(uid), 10))
	fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name())); err == nil && target == want {
			return true
		}
	}
	return false
}

// leaseHeld says whether some process holds id's lease (the lock is
// tried, and let go at once if taken).
func leaseHeld(t *testing.T, uid uint32) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(confine.DefaultLeaseDir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}
