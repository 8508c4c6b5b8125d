package images_test

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// desktopBackground is the root window colour the guest session sets
// (xsetroot -solid '#25303b').
var desktopBackground = [3]uint8{0x25, 0x30, 0x3b}

// TestBuildBakeRestoreShowsDesktop builds the minimal image, bakes it under
// TCG (or takes both from the cache), restores it once copy-on-write and
// checks the screen is the desktop: mostly the session's background colour
// with a window on it, not a blank or a text console.
func TestBuildBakeRestoreShowsDesktop(t *testing.T) {
	baked := testenv.Snapshot(t, images.FlavorMinimal)
	m := baked.Snapshot.Manifest
	if m.Machine.Width != 1280 || m.Machine.Height != 800 || m.Image.Hash != baked.Image.Hash {
		t.Fatalf("manifest %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	drv, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if err := images.RestoreCheck(ctx, drv, baked.Snapshot); err != nil {
		t.Fatalf("restore check: %v", err)
	}
	mach, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("e2e-"), Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer mach.Destroy(context.Background())
	img, err := mach.Screendump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bg, distinct := colourStats(img)
	t.Logf("screen: %.0f%% background, %d distinct colours", bg*100, distinct)
	if bg < 0.3 {
		t.Errorf("only %.0f%% of the screen is the desktop background: not the desktop", bg*100)
	}
	if distinct < 8 {
		t.Errorf("%d distinct colours: a blank or text screen, not the desktop with a window", distinct)
	}
}

func colourStats(img image.Image) (background float64, distinct int) {
	b := img.Bounds()
	seen := map[uint32]bool{}
	bg, n := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r8, g8, b8 := uint8(r>>8), uint8(g>>8), uint8(bl>>8)
			seen[uint32(r8)<<16|uint32(g8)<<8|uint32(b8)] = true
			if [3]uint8{r8, g8, b8} == desktopBackground {
				bg++
			}
			n++
		}
	}
	return float64(bg) / float64(n), len(seen)
}

func TestBakeRefusesBadInput(t *testing.T) {
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []images.BakeOptions{
		{Catalog: cat, Name: "x", CPUs: 100},
		{Catalog: cat, Name: "x", MemoryMiB: 16},
		{Catalog: cat, Name: "Bad Name"},
	} {
		if _, err := images.Bake(context.Background(), o); err == nil {
			t.Errorf("bake %+v succeeded", o)
		}
	}
	if snaps, _, _ := cat.List(); len(snaps) != 0 {
		t.Errorf("a refused bake left snapshots: %v", snaps)
	}
}

// TestFailedBakeLeavesNoMemory makes a bake fail at each point it can fail
// after its boot (the guest never ready, the context ended, the settle
// failing, the save failing) and checks each leaves no RAM file on the
// driver's tmpfs, no draft in the catalog and no QEMU running: a failed
// bake's memory file (as large as the guest's RAM) used to stay on
// /dev/shm until the next driver start swept it.
//
// The settle and save cases are about what a failure after the ready line
// leaves, not about the desktop's start (half a minute under TCG each): they
// boot the image with the ready line in its kernel command line, which the
// kernel prints on the console first thing, so the bake goes on to its
// settle within seconds of the boot.
func TestFailedBakeLeavesNoMemory(t *testing.T) {
	testenv.SkipShort(t)
	testenv.Require(t, "qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The image only (built, or cached), not a baked snapshot: the test
	// bakes its own.
	r, err := images.NewRecipe(images.FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	im, err := images.Build(ctx, r, images.BuildOptions{CacheDir: testenv.CacheDir(), Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	readyAtOnce := im
	readyAtOnce.Cmdline += " loglevel=6 -- warmdesk: ready"
	cat, err := desktop.NewCatalog(testenv.DataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	memDir := filepath.Join(testenv.DataDir(t), "memory")
	runDir := testenv.RunDir(t)
	drv, err := qemu.New(ctx, qemu.Options{RunDir: runDir, DataDir: testenv.DataDir(t), SnapshotsDir: cat.Dir(), MemoryDir: memDir, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	settled := func(ctx context.Context, m desktop.Machine) error { return nil }
	for _, tc := range []struct {
		name    string
		image   images.Image
		timeout time.Duration // of the bake's context; 0: the test's
		ready   time.Duration
		settle  func(context.Context, desktop.Machine) error
		want    string
	}{
		{name: "never ready", image: im, ready: time.Second, settle: settled, want: "did not report ready within 1s"},
		{name: "cancelled", image: im, timeout: 2 * time.Second, settle: settled, want: "context deadline exceeded"},
		{name: "settle fails", image: readyAtOnce, settle: func(context.Context, desktop.Machine) error { return errors.New("screen never settled") }, want: "screen never settled"},
		{name: "save fails", image: readyAtOnce, settle: func(_ context.Context, m desktop.Machine) error {
			// QEMU ends between the settle and the save.
			return syscall.Kill(m.Pid(), syscall.SIGKILL)
		}, want: "save template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bctx := ctx
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				bctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			var pid int
			settleCalled := false
			_, err := images.Bake(bctx, images.BakeOptions{
				Driver: drv, Catalog: cat, Image: tc.image, Name: "failing", MemoryMiB: 512, ReadyTimeout: tc.ready,
				Progress: t.Output(),
				Settle: func(ctx context.Context, m desktop.Machine) error {
					pid, settleCalled = m.Pid(), true
					return tc.settle(ctx, m)
				},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bake: got %v, want an error saying %q", err, tc.want)
			}
			if tc.image.Cmdline == readyAtOnce.Cmdline && !settleCalled {
				t.Fatalf("the bake failed before its settle: %v", err)
			}
			left, _ := os.ReadDir(memDir)
			for _, e := range left {
				t.Errorf("the failed bake left %s in the memory directory", e.Name())
			}
			drafts, _ := filepath.Glob(filepath.Join(cat.Dir(), ".draft-*"))
			if len(drafts) > 0 {
				t.Errorf("the failed bake left drafts %v", drafts)
			}
			if pid != 0 {
				if err := syscall.Kill(pid, 0); err == nil {
					t.Errorf("the failed bake's QEMU (pid %d) still runs", pid)
				}
			}
			if pids := testenv.QEMUsUnder(runDir); len(pids) > 0 {
				t.Errorf("the failed bake left QEMU running: pids %v", pids)
			}
		})
	}
}

// TestBuildRefusesUnknownPackagesUpFront builds a recipe with a misspelt
// package against debootstrap's own mirror: the build fails in seconds,
// before debootstrap, naming the package and the one meant (apt used to
// say so after the whole debootstrap, minutes in).
func TestBuildRefusesUnknownPackagesUpFront(t *testing.T) {
	testenv.SkipShort(t)
	testenv.Require(t, "debootstrap")
	r, err := images.NewRecipe(images.FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Name = "misspelt"
	r.AptPackages = append(r.AptPackages, "libreoffice-calcc", "mupdf")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var progress strings.Builder
	_, err = images.Build(ctx, r, images.BuildOptions{CacheDir: testenv.CacheDir(), Progress: &progress})
	t.Logf("progress:\n%s", progress.String())
	if err == nil || !strings.Contains(err.Error(), `"libreoffice-calcc" (did you mean libreoffice-calc?)`) || strings.Contains(err.Error(), "mupdf") {
		t.Fatalf("build: %v", err)
	}
	t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestBuildsOfTwoRecipesAtOnce builds two small recipes side by side on
// one cache, with both running apt at the same moment: a build step of
// the first holds apt's lock on its package archive while the second's
// step installs a package. The builds used to share one archive, and the
// second failed with apt's "Could not get lock
// /var/cache/apt/archives/lock".
func TestBuildsOfTwoRecipesAtOnce(t *testing.T) {
	testenv.SkipShort(t)
	testenv.Require(t, "debootstrap", "mkfs.ext4", "qemu-img")
	cache := testenv.CacheDir()
	// A name of this run's own: a recipe that an earlier run left built
	// would be found cached, not built.
	nonce := desktop.NewID("")[:8]
	dir := t.TempDir()
	// Each step waits for a file the test makes in its image's /tmp, up
	// to 10 minutes. The first holds apt's lock while dpkg is about to
	// run (apt holds the archive's lock from the download to its end).
	waitFor := func(file string) string {
		return fmt.Sprintf("i=0; while [ ! -e /tmp/%s ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done", file)
	}
	recipes := map[string]string{
		"holder": "packages: [hello]\nbuild:\n  - |\n    apt-get install -y -q --no-install-recommends -o 'DPkg::Pre-Invoke::=touch /tmp/holding; " + waitFor("release") + "' tree\n",
		"second": "packages: [figlet]\nbuild:\n  - |\n    " + waitFor("go") + "\n    apt-get install -y -q --no-install-recommends sl\n",
	}
	type build struct {
		r        images.Recipe
		progress lockedWriter
		done     chan error
	}
	builds := map[string]*build{}
	for name, body := range recipes {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("name: side-%s-%s\nfrom: minimal\n%s", name, nonce, body)), 0o644); err != nil {
			t.Fatal(err)
		}
		r, _, err := images.LoadRecipe(path)
		if err != nil {
			t.Fatal(err)
		}
		builds[name] = &build{r: r, done: make(chan error, 1)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for name, b := range builds {
		go func() {
			im, err := images.Build(ctx, b.r, images.BuildOptions{CacheDir: cache, Progress: &b.progress})
			if err == nil {
				t.Cleanup(func() { images.Remove(im) })
			}
			t.Logf("build %s ended: %v\n%s", name, err, b.progress.String())
			b.done <- err
		}()
	}
	// The file in a build's image /tmp, once its tree is there.
	tmpFile := func(b *build, name string) string {
		dirs, _ := filepath.Glob(filepath.Join(cache, "images", ".tmp-"+b.r.Hash()+"-*", "root", "tmp"))
		if len(dirs) != 1 {
			return ""
		}
		return filepath.Join(dirs[0], name)
	}
	// until polls cond (a file the guest side makes) until it holds, the
	// build named ends, or the test's time runs out.
	until := func(what string, b *build, cond func() bool) {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case err := <-b.done:
				b.done <- err
				t.Fatalf("%s: the build ended first: %v\n%s", what, err, b.progress.String())
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			case <-tick.C:
			}
		}
	}
	holder, second := builds["holder"], builds["second"]
	until("the first build holds apt's lock", holder, func() bool {
		p := tmpFile(holder, "holding")
		_, err := os.Stat(p)
		return p != "" && err == nil
	})
	until("the second build's tree is there", second, func() bool { return tmpFile(second, "") != "" })
	if err := os.WriteFile(tmpFile(second, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errSecond := <-second.done
	if err := os.WriteFile(tmpFile(holder, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errHolder := <-holder.done
	if errSecond != nil || errHolder != nil {
		t.Fatalf("the build installing while the other held apt's lock: %v\nthe other: %v", errSecond, errHolder)
	}
}

// TestBuildOfAChangedRecipeUsesTheKeptBase builds a recipe of its own
// from minimal: it unpacks the base the cache keeps instead of running
// debootstrap, and says so, and its tree, before anything else touches it,
// lists the same as debootstrap's did when the base was kept: owners,
// modes, times, xattrs, device nodes, links and every file's content.
// When no base is kept yet, this build makes it and a second, changed,
// build is the one checked.
func TestBuildOfAChangedRecipeUsesTheKeptBase(t *testing.T) {
	testenv.SkipShort(t)
	testenv.Require(t, "debootstrap", "mkfs.ext4", "qemu-img", "tar")
	cache := testenv.CacheDir()
	nonce := desktop.NewID("")[:8]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r, err := images.NewRecipe(images.FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Name = "rebased-" + nonce
	build := func(step string) (progress string, tree []string, baseDir string) {
		t.Helper()
		r.BuildSteps = []string{step}
		var w lockedWriter
		opts := images.BuildOptions{CacheDir: cache, Progress: &w}
		images.AfterBase(&opts, func(root, dir string) error {
			var err error
			tree, err = images.TreeListing(root)
			baseDir = dir
			return err
		})
		start := time.Now()
		im, err := images.Build(ctx, r, opts)
		if err != nil {
			t.Fatalf("build: %v\n%s", err, w.String())
		}
		t.Cleanup(func() { images.Remove(im) })
		t.Logf("built in %s:\n%s", time.Since(start).Round(time.Second), w.String())
		return w.String(), tree, baseDir
	}
	cached := fmt.Sprintf("] base of %s with %d packages from the cache (debootstrap of ", r.Suite, len(r.Packages))
	progress, tree, dir := build("echo one > /root/one")
	if !strings.Contains(progress, cached) {
		progress, tree, dir = build("echo two > /root/two")
	}
	if !strings.Contains(progress, cached) || strings.Contains(progress, "debootstrap (downloads") {
		t.Fatalf("the changed recipe's build did not unpack the kept base:\n%s", progress)
	}
	data, err := os.ReadFile(filepath.Join(dir, images.BaseListing))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(tree) != len(want) || strings.Join(tree, "\n") != strings.Join(want, "\n") {
		gotSet := map[string]bool{}
		for _, l := range tree {
			gotSet[l] = true
		}
		var diff []string
		for _, l := range want {
			if !gotSet[l] {
				diff = append(diff, "- "+l)
			}
			delete(gotSet, l)
		}
		for l := range gotSet {
			diff = append(diff, "+ "+l)
		}
		if len(diff) > 40 {
			diff = append(diff[:40], fmt.Sprintf("... %d more", len(diff)-40))
		}
		t.Errorf("the unpacked base (%d entries) differs from debootstrap's tree (%d entries):\n%s", len(tree), len(want), strings.Join(diff, "\n"))
	}
}

// lockedWriter keeps a build's progress, written and read at once.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
