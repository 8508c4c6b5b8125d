package images

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testDebootstrap = debootstrapInfo{version: "1.0.128+nmu2+deb12u2", mirror: "http://deb.debian.org/debian"}

func minimalRecipe(t *testing.T) Recipe {
	t.Helper()
	r, err := NewRecipe(FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBaseKey checks what names a base: everything debootstrap is run
// with and what the mirror serves, and nothing a recipe adds after it.
func TestBaseKey(t *testing.T) {
	r := minimalRecipe(t)
	rel := strings.Repeat("ab", 32)
	spec := newBaseSpec(r, "", rel, testDebootstrap)
	browser, err := NewRecipe(FlavorBrowser, 1920, 1080)
	if err != nil {
		t.Fatal(err)
	}
	office := r
	office.Name, office.Source, office.DiskMiB = "office", "office.yaml", 4096
	office.AptPackages = append(office.AptPackages, "libreoffice-calc")
	office.BuildSteps = []string{"echo configured > /etc/office"}
	office.Copies = []Copy{{Src: "sample.ods", Dst: "/root/sample.ods", Mode: 0o644, Digest: rel}}
	office.Files = office.Files[:1]
	office.Bake = BakeDefaults{MemoryMiB: 2048, OnCreate: []string{"hostname"}}
	for what, s := range map[string]baseSpec{
		"the browser flavor at another size":                     newBaseSpec(browser, "", rel, testDebootstrap),
		"a recipe's packages, files, steps, name, disk and bake": newBaseSpec(office, "", rel, testDebootstrap),
		"debootstrap's default mirror named, with a slash":       newBaseSpec(r, testDebootstrap.mirror+"/", rel, testDebootstrap),
	} {
		if s.key() != spec.key() {
			t.Errorf("%s changed the base's key:\n%+v\n%+v", what, s, spec)
		}
	}
	with := func(f func(*baseSpec)) baseSpec {
		s := newBaseSpec(r, "", rel, testDebootstrap)
		f(&s)
		return s
	}
	more := r
	more.Packages = append(slices.Clone(r.Packages), "vim")
	reordered := r
	reordered.Packages = slices.Clone(r.Packages)
	slices.Reverse(reordered.Packages)
	changed := map[string]baseSpec{
		"the suite":            with(func(s *baseSpec) { s.Suite = "trixie" }),
		"the architecture":     with(func(s *baseSpec) { s.Arch = "arm64" }),
		"the variant":          with(func(s *baseSpec) { s.Variant = "buildd" }),
		"the components":       with(func(s *baseSpec) { s.Components = []string{"main", "contrib"} }),
		"an excluded package":  with(func(s *baseSpec) { s.Exclude = []string{"vim"} }),
		"the code's version":   with(func(s *baseSpec) { s.Version++ }),
		"one more package":     newBaseSpec(more, "", rel, testDebootstrap),
		"the packages' order":  newBaseSpec(reordered, "", rel, testDebootstrap),
		"another mirror":       newBaseSpec(r, "http://mirror.invalid/debian", rel, testDebootstrap),
		"another Release file": newBaseSpec(r, "", strings.Repeat("cd", 32), testDebootstrap),
		"debootstrap's version": newBaseSpec(r, "", rel, debootstrapInfo{
			version: "1.0.134", mirror: testDebootstrap.mirror}),
	}
	seen := map[string]string{spec.key(): "the minimal flavor"}
	for what, s := range changed {
		if other, ok := seen[s.key()]; ok {
			t.Errorf("%s gives the key of %s", what, other)
		}
		seen[s.key()] = what
		// Only the Release file is left out of the package lists' name.
		if sameLists := what == "another Release file"; (s.lists() == spec.lists()) != sameLists {
			t.Errorf("%s: same lists %v, want %v", what, s.lists() == spec.lists(), sameLists)
		}
	}
	// debootstrap runs with what the key names, as builds always ran it.
	want := []string{"--variant=minbase", "--components=main", "--include=" + strings.Join(r.Packages, ","), "--cache-dir=/c/debs", "bookworm", "/c/root"}
	if got := spec.debootstrapArgs("/c/debs", "/c/root", ""); !slices.Equal(got, want) {
		t.Errorf("debootstrap's arguments:\n got %q\nwant %q", got, want)
	}
	if got := spec.debootstrapArgs("/c/debs", "/c/root", "http://m/debian"); !slices.Equal(got, append(want, "http://m/debian")) {
		t.Errorf("with a mirror given: %q", got)
	}
}

// makeTestTree makes a small root filesystem with what a debootstrap tree
// may hold and a tarball could lose: owners, setuid and sticky bits,
// xattrs (a file capability), hard and symbolic links, device nodes, a
// FIFO, and times to the nanosecond.
func makeTestTree(t *testing.T, root string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making device nodes and files of other owners takes root")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(rel string) string { return filepath.Join(root, rel) }
	for _, d := range []string{"etc", "usr/bin", "home/user", "tmp", "dev", "run", "var/empty"} {
		must(os.MkdirAll(p(d), 0o755))
	}
	file := func(rel string, mode os.FileMode, uid, gid int, content string) {
		must(os.WriteFile(p(rel), []byte(content), 0o600))
		must(os.Chown(p(rel), uid, gid))
		must(os.Chmod(p(rel), mode))
	}
	file("etc/passwd", 0o644, 0, 0, "root:x:0:0:root:/root:/bin/sh\n")
	file("etc/shadow", 0o640, 0, 42, "root:*:19000:0:99999:7:::\n")
	file("usr/bin/su", 0o755|os.ModeSetuid, 0, 0, "su")
	file("usr/bin/chage", 0o755|os.ModeSetgid, 0, 42, "chage")
	file("usr/bin/ping", 0o755, 0, 0, "ping")
	file("home/user/.profile", 0o600, 1000, 1000, "PS1='$ '\n")
	file("etc/none", 0, 0, 0, "")
	must(os.Chown(p("home/user"), 1000, 1000))
	must(os.Chmod(p("home/user"), 0o700))
	must(os.Chmod(p("tmp"), 0o777|os.ModeSticky))
	// cap_net_raw+ep, as iputils-ping sets it (VFS_CAP_REVISION_2).
	capData := make([]byte, 20)
	binary.LittleEndian.PutUint32(capData[0:], 0x02000001)
	binary.LittleEndian.PutUint32(capData[4:], 1<<13)
	must(unix.Setxattr(p("usr/bin/ping"), "security.capability", capData, 0))
	must(unix.Setxattr(p("etc/passwd"), "user.origin", []byte("base-passwd"), 0))
	must(os.Link(p("usr/bin/ping"), p("usr/bin/ping6")))
	must(os.Symlink("usr/bin", p("bin")))
	must(unix.Mknod(p("dev/null"), unix.S_IFCHR, int(unix.Mkdev(1, 3))))
	must(unix.Mknod(p("dev/vda"), unix.S_IFBLK, int(unix.Mkdev(254, 0))))
	must(unix.Mkfifo(p("run/initctl"), 0))
	must(os.Chown(p("dev/vda"), 0, 6))
	// mknod's mode goes through the umask.
	must(os.Chmod(p("dev/null"), 0o666))
	must(os.Chmod(p("dev/vda"), 0o660))
	must(os.Chmod(p("run/initctl"), 0o600))
	// Times last, deepest first, as a tree ends up: a directory's time is
	// set after what went into it.
	var paths []string
	filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		paths = append(paths, path)
		return err
	})
	slices.Reverse(paths)
	for i, path := range paths {
		ts := []unix.Timespec{unix.NsecToTimespec(1_700_000_000_123_456_789 + int64(i)*1_000_000_007), unix.NsecToTimespec(1_700_000_000_123_456_789 + int64(i)*1_000_000_007)}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// TestTreeSurvivesTheBaseTarball packs a tree as a base is packed and
// unpacks it as a build does: the two listings are the same, and the
// listing shows what a tarball could have lost.
func TestTreeSurvivesTheBaseTarball(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "root"), filepath.Join(t.TempDir(), "root")
	os.Mkdir(src, 0o755)
	makeTestTree(t, src)
	want, err := treeListing(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`"usr/bin/ping" f 0755 0 0 4 `, ` security.capability=0100000200200000`,
		`"usr/bin/ping6" f 0755 0 0 4 `, `link="usr/bin/ping"`,
		`"usr/bin/su" f 4755 0 0 2 `, `"usr/bin/chage" f 2755 0 42 `, `"tmp" d 1777 `,
		`"dev/null" c 0666 0 0 0 `, ` 1,3`, `"dev/vda" b 0660 0 6 0 `, ` 254,0`,
		`"run/initctl" p 0600 `, `"bin" l 0777 0 0 7 `, ` "usr/bin"`,
		`"home/user" d 0700 1000 1000 - `, ` user.origin=626173652d706173737764`,
	} {
		if !strings.Contains(strings.Join(want, "\n"), line) {
			t.Errorf("the listing does not show %q:\n%s", line, strings.Join(want, "\n"))
		}
	}
	var tarball bytes.Buffer
	if err := packTree(context.Background(), src, &tarball); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(dst, 0o755)
	if err := unpackTree(context.Background(), &tarball, dst); err != nil {
		t.Fatal(err)
	}
	got, err := treeListing(dst)
	if err != nil {
		t.Fatal(err)
	}
	if d := listingDiff(want, got); d != "" {
		t.Errorf("the unpacked tree differs from the packed one:\n%s", d)
	}
}

// listingDiff shows the lines only one listing has.
func listingDiff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

type testBuild struct {
	b        *builder
	progress *signalWriter
}

func newTestBuild(t *testing.T, cache, release string, want string) testBuild {
	progress := newSignalWriter(want)
	b := &builder{
		r: minimalRecipe(t), opts: BuildOptions{CacheDir: cache, Progress: progress},
		release: releaseInfo{sha256: release, date: "Sat, 11 Jul 2026 10:16:37 UTC"},
		root:    filepath.Join(t.TempDir(), "root"), start: time.Now(),
	}
	return testBuild{b, progress}
}

func readListing(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, baseListing))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestBaseIsKeptAndUnpacked keeps a tree as debootstrap's would be kept,
// then checks that a build unpacks it, saying so, into the same tree; that
// a build of the same lists waits for the one making the base and uses
// it; that a base of a newer Release replaces the older; that without the
// Release file the newest base of the lists is used, saying so; and that
// a damaged tarball is refused, and one cut short replaced.
func TestBaseIsKeptAndUnpacked(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	os.MkdirAll(basesDir(cache), 0o755)
	rel1, rel2 := strings.Repeat("01", 32), strings.Repeat("02", 32)
	spec := func(release string) baseSpec {
		return newBaseSpec(minimalRecipe(t), "", release, testDebootstrap)
	}

	// The first build's debootstrap tree, kept.
	maker := newTestBuild(t, cache, rel1, "")
	os.Mkdir(maker.b.root, 0o755)
	makeTestTree(t, maker.b.root)
	want, err := treeListing(maker.b.root)
	if err != nil {
		t.Fatal(err)
	}
	if err := maker.b.keepBase(ctx, spec(rel1), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(basesDir(cache), spec(rel1).key())
	if !slices.Equal(readListing(t, dir), want) || maker.b.baseDir != dir {
		t.Fatalf("the base kept in %s (the build says %s) does not list the tree", dir, maker.b.baseDir)
	}
	if left, _ := filepath.Glob(filepath.Join(basesDir(cache), ".tmp-*")); len(left) > 0 {
		t.Errorf("keeping the base left %v", left)
	}

	// A second build unpacks it.
	user := newTestBuild(t, cache, rel1, "")
	if err := user.b.base(ctx, spec(rel1)); err != nil {
		t.Fatalf("%v\n%s", err, user.progress)
	}
	if !strings.Contains(user.progress.String(), "[1/10 0s] base of bookworm with 22 packages from the cache (debootstrap of ") {
		t.Errorf("the build does not say its base is from the cache:\n%s", user.progress)
	}
	got, err := treeListing(user.b.root)
	if err != nil {
		t.Fatal(err)
	}
	if d := listingDiff(want, got); d != "" || user.b.baseDir != dir {
		t.Errorf("the unpacked base (from %s) differs from the tree kept:\n%s", user.b.baseDir, d)
	}

	// A build waits for the one making its base, then uses that base.
	unlock, err := lockFile(ctx, filepath.Join(basesDir(cache), "."+spec(rel2).lists()+".lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	waiter := newTestBuild(t, cache, rel2, "another build is making it")
	done := make(chan error, 1)
	go func() { done <- waiter.b.base(ctx, spec(rel2)) }()
	select {
	case <-waiter.progress.seen:
	case err := <-done:
		t.Fatalf("the build did not wait: %v\n%s", err, waiter.progress)
	case <-time.After(30 * time.Second):
		t.Fatalf("the build did not say it waits:\n%s", waiter.progress)
	}
	other := newTestBuild(t, cache, rel2, "")
	other.b.root = maker.b.root
	if err := other.b.keepBase(ctx, spec(rel2), time.Minute); err != nil {
		t.Fatal(err)
	}
	unlock()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(waiter.progress.String(), "from the cache") {
			t.Fatalf("after the wait: %v\n%s", err, waiter.progress)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the build did not end once the other's lock went")
	}
	// The newer Release's base replaced the older.
	if bases := listBases(cache); len(bases) != 1 || bases[0].Spec.Release != rel2 {
		t.Errorf("bases after a newer Release's: %+v", bases)
	}

	// Without the Release file: the newest base of the lists, saying so.
	offline := newTestBuild(t, cache, "", "")
	if err := offline.b.base(ctx, spec("")); err != nil {
		t.Fatal(err)
	}
	if s := offline.progress.String(); !strings.Contains(s, "from the cache") || !strings.Contains(s, "Release file was not read") {
		t.Errorf("without the Release file:\n%s", s)
	}

	// A damaged tarball of the right size is refused.
	bs := listBases(cache)[0]
	path := filepath.Join(bs.Dir, baseTarball)
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0xff
	os.WriteFile(path, data, 0o644)
	damaged := newTestBuild(t, cache, rel2, "")
	if err := damaged.b.unpackBase(ctx, bs); err == nil {
		t.Error("a damaged base was unpacked")
	}
	// One cut short does not load, and keeping the base again replaces it.
	os.Truncate(path, 10)
	if _, err := loadBase(bs.Dir); err == nil {
		t.Fatal("a base cut short loads")
	}
	again := newTestBuild(t, cache, rel2, "")
	again.b.root = maker.b.root
	if err := again.b.keepBase(ctx, spec(rel2), time.Minute); err != nil {
		t.Fatalf("keeping a base over one cut short: %v", err)
	}
	if _, err := loadBase(bs.Dir); err != nil {
		t.Errorf("the base kept again: %v", err)
	}
}

// fakeBase keeps a base with a tarball of no tree: enough to prune.
func fakeBase(t *testing.T, cache string, spec baseSpec, made time.Time) string {
	t.Helper()
	dir := filepath.Join(basesDir(cache), spec.key())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, baseTarball), []byte("tarball"), 0o644)
	data, _ := json.Marshal(Base{Spec: spec, MadeAt: made, TarballBytes: 7})
	os.WriteFile(filepath.Join(dir, baseManifest), data, 0o644)
	return dir
}

// TestPruneBases checks that prune keeps the newest base of the flavors'
// package lists on each mirror and removes the rest, and what interrupted
// builds left, but not what a build is making.
func TestPruneBases(t *testing.T) {
	cache := t.TempDir()
	r := minimalRecipe(t)
	now := time.Now().UTC()
	spec := func(release, mirror string, f func(*baseSpec)) baseSpec {
		s := newBaseSpec(r, mirror, strings.Repeat(release, 32), testDebootstrap)
		if f != nil {
			f(&s)
		}
		return s
	}
	current := fakeBase(t, cache, spec("03", "", nil), now)
	otherMirror := fakeBase(t, cache, spec("01", "http://mirror.invalid/debian", nil), now.Add(-time.Hour))
	keep := []string{current, otherMirror}
	remove := []string{
		fakeBase(t, cache, spec("02", "", nil), now.Add(-time.Hour)),
		fakeBase(t, cache, spec("03", "", func(s *baseSpec) { s.Version++ }), now),
		fakeBase(t, cache, spec("03", "", func(s *baseSpec) { s.Include = append(slices.Clone(s.Include), "vim") }), now),
	}
	// A build is making a base of these lists: its older base stays.
	busy := spec("04", "", func(s *baseSpec) { s.Include = s.Include[1:] })
	keep = append(keep, fakeBase(t, cache, busy, now.Add(-time.Hour)))
	unlock, err := lockFile(context.Background(), filepath.Join(basesDir(cache), "."+busy.lists()+".lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	being := filepath.Join(basesDir(cache), ".tmp-"+busy.lists()+"-123")
	left := filepath.Join(basesDir(cache), ".tmp-"+spec("05", "", nil).lists()+"-456")
	trash := filepath.Join(basesDir(cache), ".trash-abc-789")
	for _, d := range []string{being, left, trash} {
		os.MkdirAll(filepath.Join(d, "x"), 0o755)
	}
	keep = append(keep, being)
	remove = append(remove, left, trash)

	removed, err := PruneBases(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 3 {
		var names []string
		for _, bs := range removed {
			names = append(names, filepath.Base(bs.Dir))
		}
		t.Errorf("removed %d bases, want 3: %v", len(removed), names)
	}
	for _, d := range keep {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed", filepath.Base(d))
		}
	}
	for _, d := range remove {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s was kept", filepath.Base(d))
		}
	}
}
