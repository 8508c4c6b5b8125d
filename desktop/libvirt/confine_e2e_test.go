package libvirt_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// userRecord is what a machine's record says of its user.
type userRecord struct {
	UID     uint32 `json:"uid"`
	Disk    string `json:"disk"`
	DataDir string `json:"data_dir"`
	RunDir  string `json:"run_dir"`
}

func userOf(t *testing.T, m desktop.Machine) userRecord {
	t.Helper()
	var u userRecord
	if err := json.Unmarshal(m.Record(), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Each desktop's QEMU, started by libvirtd, drops to a user id of its own
// with no capabilities, and cannot open another desktop's disk; the id is
// held while the desktop lives, and its disk goes back to root before the
// id is let go (after a destroy, and a hibernation; a wake takes a new id).
func TestDesktopQEMURunsAsItsOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("user ids need root")
	}
	baked := testenv.Snapshot(t, "minimal")
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	t.Cleanup(drv.Close) // after the desktops' own cleanups
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	restore := func(spec desktop.RestoreSpec) desktop.Machine {
		t.Helper()
		spec.Snapshot = baked.Snapshot
		m, err := drv.Restore(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Destroy(context.WithoutCancel(ctx)) })
		return m
	}
	ms := []desktop.Machine{restore(desktop.RestoreSpec{ID: desktop.NewID("uid-")}), restore(desktop.RestoreSpec{ID: desktop.NewID("uid-")})}
	a, b := userOf(t, ms[0]), userOf(t, ms[1])
	if a.UID == 0 || b.UID == 0 || a.UID == b.UID || !libvirtIDs(t).Contains(a.UID) {
		t.Fatalf("QEMU user ids %d and %d: want two distinct ids of %s", a.UID, b.UID, libvirt.DefaultUIDs)
	}
	for i, m := range ms {
		u := userOf(t, m)
		runsAs(t, m.Pid(), u.UID)
		for _, dir := range []string{u.RunDir, u.DataDir} {
			fi, err := os.Stat(dir)
			if own, oerr := qemuvm.OwnerOf(dir); err != nil || oerr != nil || own != qemuvm.Root || fi.Mode().Perm() != 0o711 {
				t.Errorf("desktop %d: %s is %v owned by %v (%v %v); want root's, 0711", i, dir, fi.Mode(), own, err, oerr)
			}
		}
		if !leaseHeld(t, u.UID) {
			t.Errorf("desktop %d: its id %d is not held", i, u.UID)
		}
		// QEMU, as the desktop's user, writes the screendump file.
		if _, err := m.Screendump(ctx); err != nil {
			t.Errorf("desktop %d: screendump as the desktop's user: %v", i, err)
		}
	}
	if out, err := testenv.AsUser(a.UID, "head", "-c", "4", a.Disk); err != nil || out != "QFI\xfb" {
		t.Fatalf("desktop a's user reading its own disk: %q, %v", out, err)
	}
	if out, err := testenv.AsUser(a.UID, "head", "-c", "4", b.Disk); err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("desktop a's user reading desktop b's disk: %q, %v; want permission denied", out, err)
	}

	if err := ms[0].Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if own, err := qemuvm.OwnerOf(a.Disk); err == nil && own != qemuvm.Root {
		t.Errorf("a destroyed desktop's disk is owned by %v; want root (or gone)", own)
	}
	if leaseHeld(t, a.UID) {
		t.Errorf("id %d is still held after its desktop was destroyed", a.UID)
	}

	raw, err := ms[1].Hibernate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if own, err := qemuvm.OwnerOf(b.Disk); err != nil || own != qemuvm.Root {
		t.Errorf("a hibernated desktop's disk: owner %v, %v; want root", own, err)
	}
	woken := restore(desktop.RestoreSpec{ID: "", Hibernated: raw})
	w := userOf(t, woken)
	if own, err := qemuvm.OwnerOf(w.Disk); err != nil || own.UID != w.UID || w.UID == 0 {
		t.Errorf("the woken desktop's disk: owner %v, %v; want its new id %d", own, err, w.UID)
	}
	runsAs(t, woken.Pid(), w.UID)
	if err := woken.(desktop.Committer).Committed(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := woken.Screendump(ctx); err != nil {
		t.Errorf("the woken desktop's screendump: %v", err)
	}
}

// runsAs checks /proc/PID/status: every uid and gid uid, no capability,
// no_new_privs, and a seccomp filter.
func runsAs(t *testing.T, pid int, uid uint32) {
	t.Helper()
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(uint64(uid), 10)
	for _, line := range []string{
		"Uid:\t" + id + "\t" + id + "\t" + id + "\t" + id,
		"Gid:\t" + id + "\t" + id + "\t" + id + "\t" + id,
		"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
	} {
		if !strings.Contains(string(status), line+"\n") {
			t.Errorf("QEMU %d: /proc/PID/status lacks %q:\n%s", pid, line, status)
		}
	}
}

func libvirtIDs(t *testing.T) *confine.IDs {
	t.Helper()
	ids, err := confine.NewIDs(libvirt.DefaultUIDs, 0, confine.DefaultLeaseDir)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// leaseHeld says whether another holder has id's lease.
func leaseHeld(t *testing.T, id uint32) bool {
	t.Helper()
	l, err := libvirtIDs(t).Hold(id)
	if errors.Is(err, confine.ErrIDHeld) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	return false
}
