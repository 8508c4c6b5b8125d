package images

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalWriter collects progress and closes seen when a line holding want
// arrives.
type signalWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBuildOfTheSameRecipeWaitsAndUsesTheOther holds a recipe's build lock
// as another build would, finishes that build's image while holding it,
// and checks that a second build says it waits, then takes the image.
func TestBuildOfTheSameRecipeWaitsAndUsesTheOther(t *testing.T) {
	cache := t.TempDir()
	r, err := NewRecipe(FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	hash := r.Hash()
	root := imagesDir(cache)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(context.Background(), filepath.Join(root, "."+hash+".lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	progress := newSignalWriter("being built by another process")
	type result struct {
		im  Image
		err error
	}
	done := make(chan result, 1)
	go func() {
		im, err := Build(context.Background(), r, BuildOptions{CacheDir: cache, Progress: progress})
		done <- result{im, err}
	}()
	select {
	case <-progress.seen:
	case res := <-done:
		t.Fatalf("the build did not wait: %+v\n%s", res, progress)
	case <-time.After(30 * time.Second):
		t.Fatalf("the build did not say it waits:\n%s", progress)
	}
	// The other build's image appears, then its lock goes.
	dir := filepath.Join(root, hash)
	os.MkdirAll(dir, 0o755)
	for _, f := range []string{imageKernel, imageInitrd, imageDisk} {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	if err := writeJSON(filepath.Join(dir, imageManifest), Image{Name: "minimal", Flavor: FlavorMinimal, Hash: hash, Recipe: r}); err != nil {
		t.Fatal(err)
	}
	unlock()
	select {
	case res := <-done:
		if res.err != nil || res.im.Dir != dir {
			t.Fatalf("build: %+v, want the other build's image in %s", res, dir)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the build did not end once the other's lock went")
	}
	if !strings.Contains(progress.String(), "is cached") {
		t.Errorf("progress:\n%s", progress)
	}
}

// TestDebsGoBackToTheSharedArchive checks a build's own archive: seeded
// with the shared packages as the same files, its new and replaced
// packages given back whole, and what is not a complete package left out.
func TestDebsGoBackToTheSharedArchive(t *testing.T) {
	shared, own := filepath.Join(t.TempDir(), "debs"), filepath.Join(t.TempDir(), "debs")
	os.MkdirAll(filepath.Join(shared, "partial"), 0o755)
	for name, content := range map[string]string{"a_1_amd64.deb": "a", "b_1_amd64.deb": "b-damaged", "lock": "", "partial/c_1_amd64.deb": "c-part"} {
		os.WriteFile(filepath.Join(shared, name), []byte(content), 0o644)
	}
	n, err := seedDebs(shared, own)
	if err != nil || n != 2 {
		t.Fatalf("seeded %d: %v", n, err)
	}
	a1, _ := os.Stat(filepath.Join(shared, "a_1_amd64.deb"))
	a2, err := os.Stat(filepath.Join(own, "a_1_amd64.deb"))
	if err != nil || !os.SameFile(a1, a2) {
		t.Errorf("a seeded package is not the shared file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(own, "partial")); err != nil {
		t.Errorf("no partial directory for downloads: %v", err)
	}
	// As debootstrap does: a damaged package removed and downloaded again,
	// a new one, and one still being downloaded.
	os.Remove(filepath.Join(own, "b_1_amd64.deb"))
	os.WriteFile(filepath.Join(own, "b_1_amd64.deb"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(own, "d_1_amd64.deb"), []byte("d"), 0o644)
	os.WriteFile(filepath.Join(own, "partial", "e_1_amd64.deb"), []byte("e-part"), 0o644)
	if n, err := mergeDebs(own, shared); err != nil || n != 2 {
		t.Fatalf("merged %d: %v", n, err)
	}
	for name, want := range map[string]string{"a_1_amd64.deb": "a", "b_1_amd64.deb": "b", "d_1_amd64.deb": "d"} {
		if got, _ := os.ReadFile(filepath.Join(shared, name)); string(got) != want {
			t.Errorf("shared %s: %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(shared, "partial", "e_1_amd64.deb")); err == nil {
		t.Error("a partial download went into the shared archive")
	}
	if left, _ := filepath.Glob(filepath.Join(shared, ".in-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if n, _ := mergeDebs(own, shared); n != 0 {
		t.Errorf("merging again gave back %d packages", n)
	}
}

// TestStaleBuildsPackagesAreKept checks that the packages an interrupted
// build had downloaded go to the shared archive when its directory is
// cleaned up.
func TestStaleBuildsPackagesAreKept(t *testing.T) {
	cache := t.TempDir()
	stale := filepath.Join(imagesDir(cache), ".tmp-abc-123")
	os.MkdirAll(filepath.Join(stale, "debs", "partial"), 0o755)
	os.MkdirAll(sharedDebs(cache), 0o755)
	os.WriteFile(filepath.Join(stale, "debs", "x_1_amd64.deb"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(stale, "debs", "partial", "y_1_amd64.deb"), []byte("y-part"), 0o644)
	cleanStale(cache, imagesDir(cache), "abc")
	if got, _ := os.ReadFile(filepath.Join(sharedDebs(cache), "x_1_amd64.deb")); string(got) != "x" {
		t.Errorf("the stale build's package was not kept: %q", got)
	}
	if _, err := os.Stat(filepath.Join(sharedDebs(cache), "y_1_amd64.deb")); err == nil {
		t.Error("a partial download was kept")
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale build's directory is still there")
	}
}

func TestIdleCommand(t *testing.T) {
	name, args := idleCommand("/usr/bin/chrt", "debootstrap", []string{"--variant=minbase", "bookworm"})
	if name != "/usr/bin/chrt" || strings.Join(args, " ") != "--idle 0 debootstrap --variant=minbase bookworm" {
		t.Errorf("with chrt: %s %q", name, args)
	}
	if name, args := idleCommand("", "tar", []string{"-x"}); name != "tar" || len(args) != 1 {
		t.Errorf("without chrt: %s %q", name, args)
	}
}

// A build's commands, and what they start, run in the idle scheduling
// class.
func TestBuildCommandsRunIdle(t *testing.T) {
	if _, err := exec.LookPath("chrt"); err != nil {
		t.Skip("no chrt (util-linux)")
	}
	out, err := command(context.Background(), "sh", "-c", "sh -c 'chrt -p $$'").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "SCHED_IDLE") {
		t.Errorf("a build command's child runs %q, want SCHED_IDLE", out)
	}
}
