package images

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// debootstrap takes two to four minutes of every build, even with its
// downloads cached, and makes the same tree for every recipe: a recipe's
// packages go to apt (AptPackages), so what debootstrap is run with is the
// flavors' own. Its tree is kept as a base: a tarball of the tree as
// debootstrap left it, under the cache, named by a hash of everything that
// decides that tree (baseSpec). A build whose base is kept unpacks it
// instead of running debootstrap; what follows (apt, files, steps,
// modules, initramfs, the disk) is the same either way, and so is the
// recipe's hash.

// baseVersion changes when how a base is made or kept changes in a way
// its spec does not show (debootstrap's other arguments, the tarball's
// format), so that bases made the old way are no longer used.
const baseVersion = 1

// debootstrap's --variant and --components for every base.
const baseVariant = "minbase"

var baseComponents = []string{"main"}

// baseSpec is what decides the tree debootstrap makes. Its hash names the
// base; the same with Release left out names its package lists, to fall
// back on when the mirror's Release file cannot be read.
type baseSpec struct {
	Version int `json:"version"`
	// Debootstrap is the host's debootstrap version: its scripts decide
	// what goes in besides the packages (merged /usr, sources.list).
	Debootstrap string   `json:"debootstrap"`
	Suite       string   `json:"suite"`
	Arch        string   `json:"arch"`
	Variant     string   `json:"variant"`
	Components  []string `json:"components"`
	// Include and Exclude are debootstrap's lists, in the order given.
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
	// Mirror is where the packages come from, and what sources.list names.
	Mirror string `json:"mirror"`
	// Release is the SHA-256 of the suite's Release file on the mirror:
	// it names every package's version.
	Release string `json:"release_sha256"`
}

func (s baseSpec) key() string { return hashJSON(s) }

func (s baseSpec) lists() string {
	s.Release = ""
	return hashJSON(s)
}

func hashJSON(v any) string {
	data, _ := json.Marshal(v)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// debootstrapArgs are debootstrap's arguments for the spec. mirror is the
// mirror as the build was given it ("": debootstrap's default, which the
// spec names).
func (s baseSpec) debootstrapArgs(debs, target, mirror string) []string {
	args := []string{"--variant=" + s.Variant, "--components=" + strings.Join(s.Components, ",")}
	if len(s.Include) > 0 {
		args = append(args, "--include="+strings.Join(s.Include, ","))
	}
	if len(s.Exclude) > 0 {
		args = append(args, "--exclude="+strings.Join(s.Exclude, ","))
	}
	args = append(args, "--cache-dir="+debs, s.Suite, target)
	if mirror != "" {
		args = append(args, mirror)
	}
	return args
}

// debootstrapInfo is what the host's debootstrap script says of itself.
type debootstrapInfo struct{ version, mirror string }

// newBaseSpec is the spec of a recipe's base on a mirror (debootstrap's
// default when ""), with the Release file's checksum when known.
func newBaseSpec(r Recipe, mirror, release string, ds debootstrapInfo) baseSpec {
	if mirror == "" {
		mirror = ds.mirror
	}
	return baseSpec{
		Version: baseVersion, Debootstrap: ds.version, Suite: r.Suite, Arch: debArch(),
		Variant: baseVariant, Components: baseComponents, Include: r.Packages, Exclude: []string{},
		Mirror: mirrorURL(mirror), Release: release,
	}
}

var scriptVersion = regexp.MustCompile(`(?m)^VERSION='([^']+)'`)

// readDebootstrap reads the host's debootstrap script for its version and
// its default mirror.
func readDebootstrap() (debootstrapInfo, error) {
	path, err := exec.LookPath("debootstrap")
	if err != nil {
		return debootstrapInfo{}, errors.New("debootstrap is not installed")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return debootstrapInfo{}, err
	}
	v, m := scriptVersion.FindSubmatch(data), defMirror.FindSubmatch(data)
	if v == nil || m == nil {
		return debootstrapInfo{}, fmt.Errorf("%s names no VERSION or no default mirror (DEF_MIRROR)", path)
	}
	return debootstrapInfo{version: string(v[1]), mirror: string(m[1])}, nil
}

// basesDir holds the bases, a directory each named by its key, and a lock
// file per package lists.
func basesDir(cacheDir string) string { return filepath.Join(cacheDir, "bases") }

// A base's files.
const (
	baseManifest = "base.json"
	baseTarball  = "root.tar.gz"
	// baseListing lists debootstrap's tree as treeListing does, made from
	// the tree itself before it was packed: what an unpacked base is
	// compared with.
	baseListing = "listing"
)

// Base is a kept debootstrap tree.
type Base struct {
	Spec baseSpec `json:"spec"`
	// ReleaseDate is the Release file's Date, as the mirror wrote it.
	ReleaseDate        string    `json:"release_date"`
	MadeAt             time.Time `json:"made_at"`
	DebootstrapSeconds float64   `json:"debootstrap_seconds"`
	Files              int       `json:"files"`
	TarballBytes       int64     `json:"tarball_bytes"`
	TarballSHA256      string    `json:"tarball_sha256"`
	// Dir is where the base lives (not stored).
	Dir string `json:"-"`
}

// loadBase reads a complete base from its directory.
func loadBase(dir string) (Base, error) {
	data, err := os.ReadFile(filepath.Join(dir, baseManifest))
	if err != nil {
		return Base{}, err
	}
	var bs Base
	if err := json.Unmarshal(data, &bs); err != nil {
		return Base{}, fmt.Errorf("base %s: %w", filepath.Base(dir), err)
	}
	if bs.Spec.key() != filepath.Base(dir) {
		return Base{}, fmt.Errorf("base directory %s holds the base of another spec", filepath.Base(dir))
	}
	st, err := os.Stat(filepath.Join(dir, baseTarball))
	if err != nil {
		return Base{}, fmt.Errorf("base %s: %w", filepath.Base(dir), err)
	}
	if st.Size() != bs.TarballBytes {
		return Base{}, fmt.Errorf("base %s: its tarball has %d bytes, not %d", filepath.Base(dir), st.Size(), bs.TarballBytes)
	}
	bs.Dir = dir
	return bs, nil
}

// listBases returns every complete base in the cache, newest first.
func listBases(cacheDir string) []Base {
	entries, _ := os.ReadDir(basesDir(cacheDir))
	var out []Base
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if bs, err := loadBase(filepath.Join(basesDir(cacheDir), e.Name())); err == nil {
			out = append(out, bs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MadeAt.After(out[j].MadeAt) })
	return out
}

func (bs Base) describe() string {
	return fmt.Sprintf("debootstrap of %s (%s), the suite's Release of %s",
		bs.MadeAt.UTC().Format("2 Jan 2006 15:04 UTC"), (time.Duration(bs.DebootstrapSeconds) * time.Second).String(), bs.ReleaseDate)
}

// base puts the recipe's debootstrap tree in b.root: a kept base unpacked,
// or debootstrap's, which is then kept. Builds of one base's package
// lists make it one at a time: a second waits for the first and unpacks
// what it kept.
func (b *builder) base(ctx context.Context, spec baseSpec) error {
	// The step's line says where the base comes from, once known.
	b.step++
	title := fmt.Sprintf("base of %s with %d packages", spec.Suite, len(spec.Include))
	if spec.Release == "" {
		return b.baseUnkeyed(ctx, spec, title)
	}
	bases := basesDir(b.opts.CacheDir)
	if err := os.MkdirAll(bases, 0o755); err != nil {
		return fmt.Errorf("base cache: %w", err)
	}
	lockPath := filepath.Join(bases, "."+spec.lists()+".lock")
	waiting := func() {
		b.progress("%s: another build is making it: waiting for it, to use it", title)
	}
	unlock, err := lockFile(ctx, lockPath, waiting)
	if err != nil {
		return err
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	dir := filepath.Join(bases, spec.key())
	if bs, err := loadBase(dir); err == nil {
		// A base, once in place, is only read: others may unpack it too.
		unlock()
		unlock = nil
		b.progress("%s from the cache (%s)", title, bs.describe())
		if used, err := b.useBase(ctx, bs); used || err != nil {
			return err
		}
		if unlock, err = lockFile(ctx, lockPath, waiting); err != nil {
			return err
		}
	}
	cleanStaleBases(bases, spec.lists())
	b.progress("%s: debootstrap (downloads are cached; its tree is kept as the base of later builds)", title)
	start := time.Now()
	if err := b.debootstrap(ctx, spec); err != nil {
		return err
	}
	if err := b.keepBase(ctx, spec, time.Since(start)); err != nil {
		if ctx.Err() != nil {
			return err
		}
		b.progress("  warning: the base was not kept, the next build runs debootstrap again: %v", err)
	}
	return nil
}

// baseUnkeyed is the base when the mirror's Release file could not be
// read. debootstrap reads the same mirror, so the newest base kept for
// these package lists is used, saying so: its packages may be older than
// the mirror's. With none kept, debootstrap runs and its tree is not kept
// (what the mirror served is not known).
func (b *builder) baseUnkeyed(ctx context.Context, spec baseSpec, title string) error {
	for _, bs := range listBases(b.opts.CacheDir) {
		if bs.Spec.lists() != spec.lists() {
			continue
		}
		b.progress("%s from the cache (%s): the mirror's Release file was not read, so this is the newest base kept for these packages, and the suite may have changed since", title, bs.describe())
		if used, err := b.useBase(ctx, bs); used || err != nil {
			return err
		}
		break
	}
	b.progress("%s: debootstrap (downloads are cached; the mirror's Release file was not read, so the tree is not kept)", title)
	return b.debootstrap(ctx, spec)
}

// useBase unpacks a kept base into b.root. A base that cannot be
// unpacked is removed, and so is what of it was unpacked: used is false,
// and the caller runs debootstrap.
func (b *builder) useBase(ctx context.Context, bs Base) (used bool, err error) {
	err = b.unpackBase(ctx, bs)
	if err == nil || ctx.Err() != nil {
		return err == nil, err
	}
	b.progress("  the kept base could not be used, so it is removed and debootstrap runs: %v", err)
	removeBase(bs.Dir)
	removeTree(b.root)
	return false, nil
}

// unpackBase unpacks a kept base into b.root, checking the tarball
// against the checksum it was kept with.
func (b *builder) unpackBase(ctx context.Context, bs Base) error {
	start := time.Now()
	f, err := os.Open(filepath.Join(bs.Dir, baseTarball))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.Mkdir(b.root, 0o755); err != nil {
		return err
	}
	h := sha256.New()
	if err := unpackTree(ctx, io.TeeReader(f, h), b.root); err != nil {
		return fmt.Errorf("base %s: %w", short(bs.Spec.key()), err)
	}
	// What tar did not need (its end blocks) counts toward the checksum.
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != bs.TarballSHA256 {
		return fmt.Errorf("base %s: its tarball's SHA-256 is %s, not the %s it was kept with", short(bs.Spec.key()), short(got), short(bs.TarballSHA256))
	}
	b.baseDir = bs.Dir
	b.progress("  %d files unpacked in %s", bs.Files, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// keepBase keeps debootstrap's tree in b.root as the spec's base: written
// in a temporary directory and renamed into place whole, so that an
// interrupted build never leaves a part of a base. The caller holds the
// lock of the spec's package lists. Bases of the same lists that the
// mirror has since replaced go.
func (b *builder) keepBase(ctx context.Context, spec baseSpec, took time.Duration) error {
	start := time.Now()
	bases := basesDir(b.opts.CacheDir)
	tmp, err := os.MkdirTemp(bases, ".tmp-"+spec.lists()+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	listing, err := treeListing(b.root)
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, baseListing), []byte(strings.Join(listing, "\n")+"\n")); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(tmp, baseTarball))
	if err != nil {
		return err
	}
	h := sha256.New()
	err = packTree(ctx, b.root, io.MultiWriter(f, h))
	if err == nil {
		err = f.Sync()
	}
	var st os.FileInfo
	if err == nil {
		st, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	bs := Base{
		Spec: spec, ReleaseDate: b.release.date, MadeAt: time.Now().UTC(), DebootstrapSeconds: took.Seconds(),
		Files: len(listing), TarballBytes: st.Size(), TarballSHA256: hex.EncodeToString(h.Sum(nil)),
	}
	data, _ := json.MarshalIndent(bs, "", "  ")
	if err := writeFileSync(filepath.Join(tmp, baseManifest), data); err != nil {
		return err
	}
	final := filepath.Join(bases, spec.key())
	if _, err := os.Lstat(final); err == nil {
		// What is there did not load as a base (the caller found none).
		if err := removeBase(final); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	b.baseDir = final
	b.progress("  base kept for later builds: %d files, %d MiB, in %s", bs.Files, bs.TarballBytes>>20, time.Since(start).Round(100*time.Millisecond))
	for _, old := range listBases(b.opts.CacheDir) {
		if old.Dir != final && (old.Spec.lists() == spec.lists() || old.Spec.Version != baseVersion) {
			removeBase(old.Dir)
		}
	}
	return nil
}

// removeBase removes a base whole: renamed first, so that no one loads
// a part of it. A build unpacking it meanwhile reads on from its open
// file.
func removeBase(dir string) error {
	trash := filepath.Join(filepath.Dir(dir), ".trash-"+filepath.Base(dir)+"-"+randomHex())
	if err := os.Rename(dir, trash); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

// cleanStaleBases removes what interrupted builds of the lists' bases
// left (the caller holds the lists' lock), and removals cut short.
func cleanStaleBases(bases, lists string) {
	tmps, _ := filepath.Glob(filepath.Join(bases, ".tmp-"+lists+"-*"))
	trash, _ := filepath.Glob(filepath.Join(bases, ".trash-*"))
	for _, d := range append(tmps, trash...) {
		os.RemoveAll(d)
	}
}

// PruneBases removes the bases no build of this warmdesk uses: those of
// other package lists than the flavors' (the lists changed), made by
// another version of this code, or of a Release the mirror has replaced
// (the newest base of each lists is kept); and what interrupted builds
// left. A base whose lists a build is making is left alone.
func PruneBases(cacheDir string) ([]Base, error) {
	bases := basesDir(cacheDir)
	flavor, err := NewRecipe(FlavorMinimal, 0, 0)
	if err != nil {
		return nil, err
	}
	newest := map[string]bool{}
	var removed []Base
	var errs []error
	for _, bs := range listBases(cacheDir) { // newest first
		lists := bs.Spec.lists()
		stale := bs.Spec.Version != baseVersion || !slices.Equal(bs.Spec.Include, flavor.Packages) || newest[lists]
		newest[lists] = true
		if !stale {
			continue
		}
		unlock, ok := tryLock(filepath.Join(bases, "."+lists+".lock"))
		if !ok {
			continue
		}
		if err := removeBase(bs.Dir); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, bs)
		}
		unlock()
	}
	entries, _ := os.ReadDir(bases)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ".tmp-") && !strings.HasPrefix(name, ".trash-") {
			continue
		}
		lists, _, _ := strings.Cut(strings.TrimPrefix(name, ".tmp-"), "-")
		if strings.HasPrefix(name, ".tmp-") {
			unlock, ok := tryLock(filepath.Join(bases, "."+lists+".lock"))
			if !ok {
				continue // being written
			}
			defer unlock()
		}
		if err := os.RemoveAll(filepath.Join(bases, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// tryLock takes an exclusive lock on path if no one holds it.
func tryLock(path string) (func(), bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// The tree's owners are numbers (the image's users, not the host's), and
// xattrs (file capabilities: ping's cap_net_raw) and ACLs go with it.
var tarCommon = []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"}

// packTree writes the tree at root to w as a gzip-compressed POSIX tar
// archive. --one-file-system leaves out anything mounted in it.
func packTree(ctx context.Context, root string, w io.Writer) error {
	// Go's gzip at its fastest level packs faster than gzip -1 (15 s to
	// 18 s for a base here), and the build waits for it.
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	args := append([]string{"--create", "--file=-", "--directory=" + root, "--format=posix",
		"--pax-option=delete=atime,delete=ctime", "--one-file-system", "--sparse"}, tarCommon...)
	err := runTar(ctx, append(args, "."), nil, zw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return err
}

// unpackTree unpacks a packTree archive into root as it was: owners,
// modes, times, xattrs, device nodes and hard links.
func unpackTree(ctx context.Context, r io.Reader, root string) error {
	// tar's gzip decompresses twice as fast as Go's (a base in 10 s, not
	// 21 s, here), and every build from a kept base waits for it.
	args := append([]string{"--extract", "--gzip", "--file=-", "--directory=" + root,
		"--same-owner", "--preserve-permissions"}, tarCommon...)
	return runTar(ctx, args, r, nil)
}

func runTar(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	cmd := command(ctx, "tar", args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("tar: %w", ctx.Err())
		}
		return fmt.Errorf("tar: %w: %s", err, lastLines(stderr.String(), 5))
	}
	// GNU tar says what it could not restore and still exits 0 for some
	// (an xattr the filesystem refuses): a base is all or nothing.
	if s := strings.TrimSpace(stderr.String()); s != "" {
		return fmt.Errorf("tar: %s", lastLines(s, 5))
	}
	return nil
}

// writeFileSync writes a file and flushes it to disk before it is renamed
// into place with its directory.
func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// treeListing lists every entry of a tree, one line each, sorted by path:
// its type, mode, owner, group, size and modification time, then a
// regular file's SHA-256 (or the first path of its hard links), a link's
// target or a device's numbers, and its xattrs. Two trees with the same
// listing have the same files as a root filesystem sees them.
func treeListing(root string) ([]string, error) {
	var out []string
	inodes := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		kind, extra, size := "?", "", strconv.FormatInt(st.Size, 10)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			// A directory's size is how many entries it ever had (ext4
			// never shrinks one), not what it holds.
			kind, size = "d", "-"
		case unix.S_IFLNK:
			kind = "l"
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			extra = strconv.Quote(target)
		case unix.S_IFCHR, unix.S_IFBLK:
			kind = map[uint32]string{unix.S_IFCHR: "c", unix.S_IFBLK: "b"}[st.Mode&unix.S_IFMT]
			extra = fmt.Sprintf("%d,%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			kind = "p"
		case unix.S_IFSOCK:
			kind = "s"
		case unix.S_IFREG:
			kind = "f"
			id := [2]uint64{st.Dev, st.Ino}
			if first, ok := inodes[id]; ok && st.Nlink > 1 {
				extra = "link=" + strconv.Quote(first)
				break
			}
			inodes[id] = rel
			sum, err := fileDigest(path)
			if err != nil {
				return err
			}
			extra = sum
		}
		xattrs, err := listXattrs(path, kind == "l")
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		out = append(out, fmt.Sprintf("%s %s %04o %d %d %s %d.%09d %s%s", strconv.Quote(rel), kind, st.Mode&0o7777, st.Uid, st.Gid,
			size, st.Mtim.Sec, st.Mtim.Nsec, extra, xattrs))
		return nil
	})
	sort.Strings(out)
	return out, err
}

// listXattrs is " name=hexvalue" for each xattr of path, sorted.
func listXattrs(path string, link bool) (string, error) {
	list, get := unix.Listxattr, unix.Getxattr
	if link {
		list, get = unix.Llistxattr, unix.Lgetxattr
	}
	size, err := list(path, nil)
	if errors.Is(err, unix.ENOTSUP) || size == 0 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	buf := make([]byte, size)
	n, err := list(path, buf)
	if err != nil {
		return "", err
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		size, err := get(path, name, nil)
		if err != nil {
			return "", err
		}
		val := make([]byte, size)
		m, err := get(path, name, val)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " %s=%s", name, hex.EncodeToString(val[:m]))
	}
	return b.String(), nil
}
