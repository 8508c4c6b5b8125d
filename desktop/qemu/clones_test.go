package qemu_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// managerOn returns a Manager on a real QEMU driver over a catalog.
func managerOn(t *testing.T, cat *desktop.Catalog, limits desktop.Limits) (*desktop.Manager, *qemu.Driver) {
	t.Helper()
	drv, err := qemu.New(context.Background(), qemu.Options{RunDir: testenv.RunDir(t), DataDir: t.TempDir(), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	m := desktop.NewManager(context.Background(), desktop.Config{Driver: drv, Store: desktoptest.NewMemStore(), Catalog: cat, Logger: testenv.Logger(t), Limits: limits})
	t.Cleanup(func() {
		for _, d := range m.List() {
			m.Delete(context.Background(), d.ID)
		}
		m.Close()
	})
	return m, drv
}

func guestShell(t *testing.T, m *desktop.Manager, id, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mach, _, err := m.Machine(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := desktop.Shell(ctx, mach.Agent(), script, 30*time.Second)
	if err != nil {
		t.Fatalf("guest %s: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("guest %s: exit %d: %s", script, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// Every clone of one snapshot starts from the same RAM: vmgenid must make
// their RNGs differ, and the Manager must set each one's clock and
// identity.
func TestClonesGetOwnRandomnessClockAndIdentity(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	m, _ := managerOn(t, baked.Catalog, desktop.DefaultLimits())
	ctx := context.Background()
	var ids []string
	for range 2 {
		d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	var random, hosts, machineIDs []string
	for _, id := range ids {
		random = append(random, guestShell(t, m, id, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"))
		clock := guestShell(t, m, id, "date +%s.%N")
		guest, err := strconv.ParseFloat(clock, 64)
		if err != nil {
			t.Fatalf("guest clock %q: %v", clock, err)
		}
		// The guest read its clock within the agent's round trip before
		// now; allow for that round trip on a loaded TCG host.
		if skew := float64(time.Now().UnixNano())/1e9 - guest; skew < -1 || skew > 1 {
			t.Errorf("desktop %s: guest clock is %.2f s off the host's", id, skew)
		}
		hosts = append(hosts, guestShell(t, m, id, "hostname"))
		machineIDs = append(machineIDs, guestShell(t, m, id, "cat /etc/machine-id"))
	}
	if random[0] == random[1] || len(random[0]) != 64 {
		t.Errorf("two clones read the same random bytes: %v", random)
	}
	if hosts[0] != ids[0] || hosts[1] != ids[1] {
		t.Errorf("hostnames %v, want the desktop ids %v", hosts, ids)
	}
	if machineIDs[0] == machineIDs[1] || len(machineIDs[0]) != 32 {
		t.Errorf("machine ids %v are not distinct 32-digit ids", machineIDs)
	}
}

// A few dozen mixed calls on the same desktops from several goroutines
// leave a consistent Manager and no orphan QEMU process or file.
func TestConcurrentMixedCallsOnQEMU(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	limits := desktop.DefaultLimits()
	limits.PoolSize = 0
	m, _ := managerOn(t, baked.Catalog, limits)
	ctx := context.Background()
	var mu sync.Mutex
	var ids []string
	pick := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return "none"
		}
		return ids[r.IntN(len(ids))]
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 12 {
				switch r.IntN(6) {
				case 0, 1:
					if d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name}); err == nil {
						mu.Lock()
						ids = append(ids, d.ID)
						mu.Unlock()
					} else {
						t.Errorf("create: %v", err)
					}
				case 2:
					m.Delete(ctx, pick(r))
				case 3:
					if cs, err := m.Fork(ctx, pick(r), 1); err == nil {
						mu.Lock()
						ids = append(ids, cs[0].ID)
						mu.Unlock()
					}
				case 4:
					m.Pause(ctx, pick(r))
				case 5:
					m.Resume(ctx, pick(r))
				}
			}
		}()
	}
	wg.Wait()
	live := 0
	for _, d := range m.List() {
		if d.State.Live() {
			live++
		}
		if d.State == desktop.StateFailed {
			t.Errorf("desktop %s failed: %s", d.ID, d.Reason)
		}
	}
	if n := qemuProcesses(t, ids); n != live {
		t.Errorf("%d QEMU processes for %d live desktops", n, live)
	}
	for _, d := range m.List() {
		if err := m.Delete(ctx, d.ID); err != nil {
			t.Errorf("delete %s: %v", d.ID, err)
		}
	}
	if n := qemuProcesses(t, ids); n != 0 {
		t.Errorf("%d QEMU processes left after deleting everything", n)
	}
	snaps, _, _ := baked.Catalog.List()
	for _, s := range snaps {
		if s.Manifest.Ephemeral && s.Manifest.Source != "" {
			for _, id := range ids {
				if s.Manifest.Source == id {
					t.Errorf("fork template %s of %s left behind", s.Name, id)
				}
			}
		}
	}
}

// qemuProcesses counts QEMU processes whose command line names one of ids
// (the clone directories carry the desktop id, or a pool id for pooled
// ones, which this test turns off).
func qemuProcesses(t *testing.T, ids []string) int {
	out, _ := exec.Command("pgrep", "-a", "qemu-system").Output()
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		for _, id := range ids {
			if strings.Contains(line, "guest="+id+",") {
				n++
			}
		}
	}
	return n
}

// A snapshot into a filesystem that fills up fails cleanly: the source keeps
// running and no partial snapshot is listed.
func TestSnapshotOnFullDiskFailsCleanly(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	small := t.TempDir()
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	// A catalog on the small filesystem, holding a link to the golden
	// snapshot by copying its manifest and pointing at its files.
	cat, err := desktop.NewCatalog(filepath.Join(small, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(cat.Dir(), baked.Snapshot.Name)
	os.Mkdir(golden, 0o700)
	for _, f := range []string{desktop.FileMemory, desktop.FileState, desktop.FileDisk, "manifest.json"} {
		if err := os.Symlink(filepath.Join(baked.Snapshot.Dir, f), filepath.Join(golden, f)); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := managerOn(t, cat, desktop.DefaultLimits())
	ctx := context.Background()
	d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Snapshot(ctx, d.ID, "too-big")
	if err == nil {
		t.Fatal("a 1 GiB snapshot fitted in 64 MiB")
	}
	t.Logf("snapshot failed as it should: %v", err)
	if got, _ := m.Get(d.ID); got.State != desktop.StateRunning {
		t.Fatalf("source is %s after the failed snapshot, want running", got.State)
	}
	if _, err := cat.Get("too-big"); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("the failed snapshot is listed: %v", err)
	}
	entries, _ := os.ReadDir(cat.Dir())
	for _, e := range entries {
		if e.Name() != baked.Snapshot.Name {
			t.Errorf("left in the catalog: %s", e.Name())
		}
	}
	// The source still answers: its screen and its guest.
	out := guestShell(t, m, d.ID, "echo alive")
	if !bytes.Equal([]byte(out), []byte("alive")) {
		t.Errorf("guest answered %q", out)
	}
}

// A paused desktop forks, stays paused, forks again and resumes: a
// completed migration leaves the source's disks inactive, and a second
// freeze of an inactive disk would abort QEMU.
func TestForkPausedDesktopTwice(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	m, _ := managerOn(t, baked.Catalog, desktop.DefaultLimits())
	ctx := context.Background()
	d, err := m.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		copies, err := m.Fork(ctx, d.ID, 1)
		if err != nil {
			t.Fatalf("fork %d of a paused desktop: %v", i+1, err)
		}
		if got, _ := m.Get(d.ID); got.State != desktop.StatePaused {
			t.Fatalf("after fork %d the source is %s, want paused", i+1, got.State)
		}
		if err := m.Delete(ctx, copies[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Resume(ctx, d.ID); err != nil {
		t.Fatalf("resume after two forks: %v", err)
	}
	if out := guestShell(t, m, d.ID, "echo ok"); out != "ok" {
		t.Fatalf("guest answered %q", out)
	}
}
