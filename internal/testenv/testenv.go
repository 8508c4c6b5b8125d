// Package testenv gives end-to-end tests real parts: it checks that host
// tools are installed (skipping outside CI, failing under CI=true), and
// builds and bakes guest images once, caching them across runs under the
// cache directory keyed by their recipe and the QEMU build.
package testenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/settle"
	"github.com/warmdesk/warmdesk/images"
)

// InCI reports whether the tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips the test when a tool is missing, or fails it in CI.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s is not installed (run scripts/setup, which .ci/run calls)", tool)
			if InCI() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// SkipShort skips end-to-end tests in -short mode (never in CI).
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() && !InCI() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// CacheDir is where images and test snapshots are cached across runs.
func CacheDir() string {
	if d := os.Getenv("WARMDESK_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/warmdesk"
}

// Baked is a golden snapshot ready for tests.
type Baked struct {
	Image    images.Image
	Catalog  *desktop.Catalog
	Snapshot desktop.Snapshot
}

// Logger logs to the test.
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("WARMDESK_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// RunDir makes a short directory for sockets (unix socket paths are
// limited to 108 bytes, and test temp directories can be long).
func RunDir(t testing.TB) string {
	t.Helper()
	return topTempDir(t, "wd")
}

// DataDir is a directory for machines' disks or a hostd state directory.
// Unlike t.TempDir's, its parent (the system's temporary directory) lets
// other users through: QEMU runs as each machine's own user and must
// reach that machine's directory below it.
func DataDir(t testing.TB) string {
	t.Helper()
	return topTempDir(t, "wdd")
}

func topTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Snapshot returns a baked snapshot of a flavor, building the image and
// baking it when no cached one fits this host's QEMU build. Concurrent test
// processes wait for one another.
func Snapshot(t testing.TB, flavor string) Baked {
	t.Helper()
	recipe, err := images.NewRecipe(flavor, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bake(t, recipe, flavor)
}

// RecipeSnapshot is Snapshot for a recipe file: its image is built and
// baked once per recipe hash (copied files included), with the recipe's
// memory and CPUs.
func RecipeSnapshot(t testing.TB, path string) Baked {
	t.Helper()
	recipe, name, err := images.LoadRecipe(path)
	if err != nil {
		t.Fatal(err)
	}
	return bake(t, recipe, name)
}

func bake(t testing.TB, recipe images.Recipe, name string) Baked {
	t.Helper()
	SkipShort(t)
	Require(t, "qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cache := CacheDir()
	im, err := images.Build(ctx, recipe, images.BuildOptions{CacheDir: cache, Name: name, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("build %s image: %v", name, err)
	}
	catalog, err := desktop.NewCatalog(filepath.Join(cache, "test-snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	unlock := lock(t, filepath.Join(cache, "test-snapshots", ".bake.lock"))
	defer unlock()
	drv, err := qemu.New(ctx, qemu.Options{RunDir: RunDir(t), DataDir: DataDir(t), Logger: Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	shape := drv.Shape()
	snapName := fmt.Sprintf("%s-%s-%s", name, im.Hash[:8], shape.QEMUSHA256[:8])
	if snap, err := catalog.Get(snapName); err == nil {
		m := snap.Manifest.Machine
		// A snapshot baked before the device list changed restores, but
		// lacks what the change added (the volumes' root ports).
		if err := catalog.Verify(snap); err == nil && len(m.Mismatch(shape)) == 0 &&
			slices.Equal(m.Devices, qemuvm.DeviceArgs(m.Width, m.Height)) &&
			slices.Equal(snap.Manifest.OnCreate, im.Recipe.Bake.OnCreate) {
			return ownCatalog(t, im, snap)
		}
		catalog.Remove(snapName)
	}
	start := time.Now()
	snap, err := images.Bake(ctx, images.BakeOptions{
		Driver: drv, Catalog: catalog, Image: im, Name: snapName, Progress: testWriter{t},
		CPUs: im.Recipe.Bake.CPUs, MemoryMiB: im.Recipe.Bake.MemoryMiB,
		Settle: func(ctx context.Context, m desktop.Machine) error {
			_, err := settle.Machine(ctx, m, 2*time.Second, 5*time.Minute, Logger(t))
			return err
		},
	})
	if err != nil {
		t.Fatalf("bake %s: %v", snapName, err)
	}
	t.Logf("baked %s in %s", snapName, time.Since(start).Round(time.Second))
	prune(t, catalog, name, snapName)
	return ownCatalog(t, im, snap)
}

// ownCatalog gives a test a catalog of its own holding the shared baked
// snapshot (linked, not copied). What the test's forks and snapshots add
// goes there and with the test: a Manager's recovery collects the fork
// templates no desktop of its store uses, so tests in other processes
// sharing one catalog would collect each other's.
func ownCatalog(t testing.TB, im images.Image, shared desktop.Snapshot) Baked {
	t.Helper()
	dir := DataDir(t)
	if err := os.Symlink(shared.Dir, filepath.Join(dir, shared.Name)); err != nil {
		t.Fatal(err)
	}
	cat, err := desktop.NewCatalog(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Before the directory goes: fork templates' memory lives on tmpfs.
	t.Cleanup(func() {
		snaps, _, _ := cat.List()
		for _, s := range snaps {
			if s.Name != shared.Name {
				cat.Remove(s.Name)
			}
		}
	})
	snap, err := cat.Get(shared.Name)
	if err != nil {
		t.Fatal(err)
	}
	return Baked{Image: im, Catalog: cat, Snapshot: snap}
}

// prune removes the test snapshots of a flavor that an older recipe or QEMU
// build made, the images nothing uses any more (a test's or the host's
// snapshots) and the debootstrap bases no build uses, so repeated CI runs
// on one machine do not fill its disk.
func prune(t testing.TB, catalog *desktop.Catalog, flavor, current string) {
	snaps, _, _ := catalog.List()
	used := map[string]bool{}
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, flavor+"-") && s.Name != current && !s.Manifest.Ephemeral {
			if err := catalog.Remove(s.Name); err == nil {
				t.Logf("removed stale test snapshot %s", s.Name)
				continue
			}
		}
		used[s.Manifest.Image.Hash] = true
	}
	hostDir := config.DefaultPaths().Snapshots()
	if _, err := os.Stat(hostDir); err != nil {
		hostDir = ""
	}
	if host, err := desktop.NewCatalog(hostDir); hostDir != "" && err == nil {
		hostSnaps, _, _ := host.List()
		for _, s := range hostSnaps {
			used[s.Manifest.Image.Hash] = true
		}
	}
	removed, err := images.Prune(CacheDir(), used)
	for _, im := range removed {
		t.Logf("removed unused image %s (%s)", im.Name, im.Hash[:12])
	}
	if err != nil {
		t.Logf("pruning images: %v", err)
	}
	bases, err := images.PruneBases(CacheDir())
	for _, bs := range bases {
		t.Logf("removed unused debootstrap base %s", filepath.Base(bs.Dir))
	}
	if err != nil {
		t.Logf("pruning debootstrap bases: %v", err)
	}
}

func lock(t testing.TB, path string) func() {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

var _ io.Writer = testWriter{}

// Poll calls done until it returns true or timeout passes, sleeping first
// between calls and doubling that up to most, and calling done once more at
// the deadline. It is for what a guest or a browser does on its own time,
// which gives no signal to wait on.
func Poll(timeout, first, most time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := first; ; wait = min(2*wait, most) {
		if done() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(wait, left))
	}
}

// SoakDuration is how long a soak runs: WARMDESK_SOAK (for example 2m,
// which scripts/test sets for a step of its own, so the load does not
// share the cores with the timing-sensitive end-to-end tests). Unset, the
// soak is skipped.
func SoakDuration(t testing.TB) time.Duration {
	t.Helper()
	v := os.Getenv("WARMDESK_SOAK")
	if v == "" {
		t.Skip("set WARMDESK_SOAK (for example 2m) to run the soak")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("WARMDESK_SOAK=%q: %v", v, err)
	}
	return d
}

// OpenFDs counts this process's open descriptors, for leak checks.
func OpenFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// QEMUsUnder lists the QEMU processes whose command line names a path
// under dir (a test's run directory): what a test's hostd left running.
func QEMUsUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "qemu-system") && strings.Contains(string(cmdline), dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// AsUser runs a command as uid (and gid uid) with no supplementary groups,
// returning its combined output: what a machine's QEMU, running as its own
// id, could read.
func AsUser(uid uint32, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
