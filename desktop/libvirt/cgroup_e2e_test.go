package libvirt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A desktop's QEMU, started by libvirtd, sits in a cgroup of its own with
// the QEMU driver's limits, and the cgroup goes with the desktop.
func TestDesktopQEMUHasACgroupOfItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	baked := testenv.Snapshot(t, "minimal")
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("cg-"), Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	var rec struct {
		Cgroup []string `json:"cgroup"`
	}
	if err := json.Unmarshal(m.Record(), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Cgroup) == 0 {
		t.Fatalf("the machine's record names no cgroup: %s", m.Record())
	}
	g := confine.GroupAt(rec.Cgroup)
	if !g.Contains(m.Pid()) {
		t.Fatalf("QEMU (pid %d) is not in its cgroup %s", m.Pid(), g.MemoryDir())
	}
	shape := baked.Snapshot.Manifest.Machine
	want := qemuvm.MachineLimits(shape)
	limit := "memory.limit_in_bytes"
	if len(rec.Cgroup) == 1 {
		limit = "memory.max"
	}
	if got := readInt(t, filepath.Join(g.MemoryDir(), limit)); got != want.MemoryBytes {
		t.Errorf("%s = %d, want %d (guest RAM plus QEMU's own)", limit, got, want.MemoryBytes)
	}
	if len(rec.Cgroup) == 3 {
		if got := readInt(t, filepath.Join(rec.Cgroup[2], "pids.max")); got != int64(want.PidsMax) {
			t.Errorf("pids.max = %d, want %d", got, want.PidsMax)
		}
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(self), filepath.Base(g.MemoryDir())) {
		t.Errorf("the test process is in the desktop's cgroup: %s", self)
	}

	if err := m.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	// Removed in the background once libvirtd has reaped QEMU.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(g.MemoryDir()); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended desktop's cgroup %s is still there", g.MemoryDir())
		}
		time.Sleep(20 * time.Millisecond) // no event for an rmdir
	}
}

// A desktop domain no record owns, found by the next hostd's sweep, goes
// with its cgroup: no machine of that hostd watched it end.
func TestSweepRemovesTheCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	baked := testenv.Snapshot(t, "minimal")
	run, data := testenv.RunDir(t), testenv.DataDir(t)
	drv := newDriver(t, run, data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("cg-"), Snapshot: baked.Snapshot})
	if err != nil {
		drv.Close()
		t.Fatal(err)
	}
	var rec struct {
		Cgroup []string `json:"cgroup"`
	}
	if err := json.Unmarshal(m.Record(), &rec); err != nil || len(rec.Cgroup) == 0 {
		m.Destroy(context.WithoutCancel(ctx))
		drv.Close()
		t.Fatalf("the machine's record names no cgroup (%v): %s", err, m.Record())
	}
	// hostd stops with the domain running and unrecorded.
	drv.Close()
	next := newDriver(t, run, data)
	defer next.Close()
	swept, err := next.Sweep(ctx, nil)
	if err != nil || len(swept) != 1 {
		t.Fatalf("sweep = %v, %v; want the one domain", swept, err)
	}
	for _, dir := range rec.Cgroup {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the swept desktop's cgroup %s is still there (%v)", dir, err)
		}
	}
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return n
}
