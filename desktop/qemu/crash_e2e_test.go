package qemu_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
)

// A QEMU that dies of a fault while its clone restores is replaced once by
// a new process, so the restore succeeds; one killed on purpose is not.
func TestRestoreOutlivesACrashedQEMU(t *testing.T) {
	r := newConfinedRig(t)
	var pids []int
	qemu.SetBeforeRestore(r.d, func(pid int) {
		pids = append(pids, pid)
		if len(pids) == 1 {
			syscall.Kill(pid, syscall.SIGSEGV)
		}
	})
	m := r.restore(desktop.RestoreSpec{ID: "d-crash1"})
	if len(pids) != 2 {
		t.Fatalf("%d QEMU processes restored, want 2 (the crashed one and its replacement)", len(pids))
	}
	if m.Pid() != pids[1] {
		t.Fatalf("the desktop runs in pid %d, want the replacement %d", m.Pid(), pids[1])
	}
	if syscall.Kill(pids[0], 0) == nil {
		t.Errorf("the crashed QEMU %d still runs", pids[0])
	}
	select {
	case <-m.Exited():
		t.Fatalf("the replacement ended: %s", m.ExitReason())
	default:
	}

	pids = nil
	qemu.SetBeforeRestore(r.d, func(pid int) {
		pids = append(pids, pid)
		syscall.Kill(pid, syscall.SIGKILL)
	})
	_, err := r.d.Restore(r.ctx, desktop.RestoreSpec{ID: "d-crash2", Snapshot: r.baked.Snapshot})
	if err == nil {
		t.Fatal("a restore whose QEMU was killed succeeded")
	}
	if len(pids) != 1 {
		t.Errorf("%d QEMU processes for a restore killed on purpose, want 1 (no second try)", len(pids))
	}
	if strings.Contains(err.Error(), "(QEMU ") {
		t.Errorf("a kill is reported as a crash: %v", err)
	}
}
