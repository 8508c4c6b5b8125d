package images

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildOptions configure an image build.
type BuildOptions struct {
	// CacheDir holds built images (by recipe hash) and downloaded packages.
	CacheDir string
	// Name is the image's name (default: the flavor).
	Name string
	// Mirror is the Debian mirror URL for debootstrap; empty uses
	// debootstrap's default.
	Mirror string
	// Progress receives one line per step and per notable event of a long
	// step; nil discards them.
	Progress io.Writer

	// afterBase, when set, is called with the image tree and the base's
	// directory as soon as the base is in place, before anything else
	// changes the tree (tests compare it with debootstrap's).
	afterBase func(root, baseDir string) error
}

// hostTools are the programs a build needs, with the Debian package of each.
var hostTools = []struct{ name, pkg string }{
	{"debootstrap", "debootstrap"},
	{"mkfs.ext4", "e2fsprogs"},
	{"qemu-img", "qemu-utils"},
	{"chroot", "coreutils"},
	{"tar", "tar"},
	{"gzip", "gzip"},
}

// CheckTools reports every missing host tool in one error that names the
// Debian packages to install.
func CheckTools() error {
	var missing, pkgs []string
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.name); err != nil {
			missing = append(missing, t.name)
			pkgs = append(pkgs, t.pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing host tools %s: install them with `apt-get install %s`", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	return nil
}

// Build builds the image of a recipe, or returns it from the cache. The
// build runs in a temporary directory next to its final place and is
// renamed into place only when complete; a failed or interrupted build
// leaves nothing a later run could take for an image.
func Build(ctx context.Context, r Recipe, opts BuildOptions) (Image, error) {
	if opts.Name == "" {
		opts.Name = r.Flavor
		if r.Name != "" {
			opts.Name = r.Name
		}
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	hash := r.Hash()
	root := imagesDir(opts.CacheDir)
	final := filepath.Join(root, hash)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Image{}, fmt.Errorf("image cache: %w", err)
	}
	// One build per recipe at a time; a second caller waits, then finds it.
	unlock, err := lockFile(ctx, filepath.Join(root, "."+hash+".lock"), func() {
		fmt.Fprintf(opts.Progress, "image %s (%s) is being built by another process: waiting for it to finish, to use its image\n", opts.Name, short(hash))
	})
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if im, err := loadImage(final); err == nil {
		// Asked for again: it is now the newest of its name (an edit
		// undone brings back the image it had), with what is not part of
		// the hash taken from this recipe.
		im.Name, im.Recipe.Source, im.Recipe.Bake = opts.Name, r.Source, r.Bake
		im.ChosenAt = time.Now().UTC()
		if err := writeJSON(filepath.Join(final, imageManifest), im); err != nil {
			return Image{}, fmt.Errorf("image %s: %w", im.Name, err)
		}
		fmt.Fprintf(opts.Progress, "image %s (%s) is cached: %s\n", im.Name, short(hash), final)
		return im, nil
	}
	release, err := checkPackages(ctx, r, opts)
	if err != nil {
		return Image{}, fmt.Errorf("build image %s: %w", opts.Name, err)
	}
	if err := CheckTools(); err != nil {
		return Image{}, err
	}
	cleanStale(opts.CacheDir, root, hash)
	tmp, err := os.MkdirTemp(root, ".tmp-"+hash+"-")
	if err != nil {
		return Image{}, fmt.Errorf("image build: %w", err)
	}
	b := &builder{r: r, opts: opts, release: release, dir: tmp, root: filepath.Join(tmp, "root"), debs: filepath.Join(tmp, "debs"), start: time.Now()}
	defer b.cleanup()
	im, err := b.run(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("build image %s: %w", opts.Name, err)
	}
	b.keepDebs()
	// Only now does the image appear under its hash.
	if err := os.Rename(tmp, final); err != nil {
		return Image{}, fmt.Errorf("build image %s: %w", opts.Name, err)
	}
	b.dir = ""
	im.Dir = final
	fmt.Fprintf(opts.Progress, "image %s built in %s: %s\n", im.Name, time.Since(b.start).Round(time.Second), final)
	return im, nil
}

// releaseInfo is the mirror's Release file for the suite, as this build
// read it: its SHA-256 ("" when it was not read) and its Date.
type releaseInfo struct{ sha256, date string }

// checkPackages fails a build whose recipe names packages that the
// mirror's suite does not have, every one of them in one error, before
// debootstrap runs. Without a package list (no mirror answers and none is
// kept) the build goes on, and apt says which name it cannot find. It
// returns the Release file it read.
func checkPackages(ctx context.Context, r Recipe, opts BuildOptions) (releaseInfo, error) {
	mirror := opts.Mirror
	var err error
	if mirror == "" {
		mirror, err = defaultMirror()
	}
	var ix *packageIndex
	var note string
	if err == nil {
		ix, note, err = loadPackageIndex(ctx, mirror, r.Suite, opts.CacheDir)
	}
	if err != nil {
		fmt.Fprintf(opts.Progress, "package names not checked before the build (apt will say which it cannot find): %v\n", err)
		return releaseInfo{}, nil
	}
	if note != "" {
		fmt.Fprintf(opts.Progress, "package names: %s\n", note)
	}
	release := releaseInfo{sha256: ix.Release, date: ix.Date}
	names := append(append([]string(nil), r.Packages...), r.AptPackages...)
	bad := ix.unknown(names)
	if len(bad) == 0 {
		fmt.Fprintf(opts.Progress, "%d package names found in Debian %s (main, %s; the list of %s)\n", len(names), ix.Suite, ix.Arch, ix.Date)
		return release, nil
	}
	where := ""
	if r.Source != "" {
		where = "recipe " + r.Source + ": "
	}
	return releaseInfo{}, fmt.Errorf("%sDebian %s (main, %s; the list of %s) has no package %s: correct the names (apt-cache search finds them on a Debian %s host) and build again",
		where, ix.Suite, ix.Arch, ix.Date, strings.Join(bad, ", "), ix.Suite)
}

type builder struct {
	r       Recipe
	opts    BuildOptions
	release releaseInfo
	// baseDir is the kept base the tree came from or went to, if any.
	baseDir string
	dir     string // temporary build directory; "" once moved into place
	root    string // the guest's root filesystem while it is built
	// debs is the build's own package archive (debootstrap's cache and
	// apt's archive in the image), seeded from the shared one and given
	// back to it: two builds never share one, nor apt's lock in it.
	debs   string
	seeded int // packages in debs when the build started
	start  time.Time
	mounts []string // mounted inside the image, to unmount
	step   int
	// lastPhase is the debootstrap phase last shown, phaseLines how many
	// lines it has had.
	lastPhase  string
	phaseLines int
	// echo shows every output line (a recipe's build steps).
	echo bool
}

const buildSteps = 10

func (b *builder) progress(format string, args ...any) {
	el := time.Since(b.start).Round(time.Second)
	fmt.Fprintf(b.opts.Progress, "[%d/%d %s] %s\n", b.step, buildSteps, el, fmt.Sprintf(format, args...))
}

func (b *builder) next(format string, args ...any) {
	b.step++
	b.progress(format, args...)
}

func (b *builder) run(ctx context.Context) (Image, error) {
	seeded, err := seedDebs(sharedDebs(b.opts.CacheDir), b.debs)
	if err != nil {
		return Image{}, err
	}
	b.seeded = seeded
	ds, err := readDebootstrap()
	if err != nil {
		return Image{}, err
	}
	if err := b.base(ctx, newBaseSpec(b.r, b.opts.Mirror, b.release.sha256, ds)); err != nil {
		return Image{}, err
	}
	if b.opts.afterBase != nil {
		if err := b.opts.afterBase(b.root, b.baseDir); err != nil {
			return Image{}, err
		}
	}
	b.next("installing %d more packages with apt", len(b.r.AptPackages))
	if err := b.aptInstall(ctx); err != nil {
		return Image{}, err
	}
	b.next("writing warmdesk's guest files")
	if err := b.writeFiles(); err != nil {
		return Image{}, err
	}
	b.next("copying %d files of the recipe", len(b.r.Copies))
	if err := b.copyFiles(ctx); err != nil {
		return Image{}, err
	}
	b.next("running %d build steps of the recipe", len(b.r.BuildSteps))
	if err := b.buildSteps(ctx); err != nil {
		return Image{}, err
	}
	kver, err := b.kernelVersion()
	if err != nil {
		return Image{}, err
	}
	b.next("pruning kernel modules of %s to what the VM needs", kver)
	if err := b.pruneModules(ctx, kver); err != nil {
		return Image{}, err
	}
	b.next("building the initramfs")
	if err := b.initramfs(ctx); err != nil {
		return Image{}, err
	}
	b.next("removing package caches and documentation")
	b.slim()
	b.next("creating the ext4 root filesystem and qcow2 disk")
	size, err := b.makeDisk(ctx)
	if err != nil {
		return Image{}, err
	}
	b.next("writing the image manifest")
	for src, dst := range map[string]string{"boot/vmlinuz-" + kver: imageKernel, "boot/initrd.img-" + kver: imageInitrd} {
		if err := copyFile(filepath.Join(b.root, src), filepath.Join(b.dir, dst)); err != nil {
			return Image{}, err
		}
	}
	if err := os.RemoveAll(b.root); err != nil {
		return Image{}, err
	}
	im := Image{
		Name: b.opts.Name, Flavor: b.r.Flavor, Hash: b.r.Hash(), Width: b.r.Width, Height: b.r.Height,
		KernelVersion: kver, Cmdline: b.r.Cmdline, CreatedAt: time.Now().UTC(),
		BuildSeconds: time.Since(b.start).Seconds(), DiskBytes: size, Recipe: b.r,
	}
	if err := writeJSON(filepath.Join(b.dir, imageManifest), im); err != nil {
		return Image{}, err
	}
	return im, nil
}

func (b *builder) debootstrap(ctx context.Context, spec baseSpec) error {
	b.progress("  %d packages downloaded by earlier builds", b.seeded)
	if err := b.stream(ctx, "debootstrap", spec.debootstrapArgs(b.debs, b.root, b.opts.Mirror)...); err != nil {
		// debootstrap's own log says which package failed and why.
		if tail := fileTail(filepath.Join(b.root, "debootstrap", "debootstrap.log"), 25); tail != "" {
			err = fmt.Errorf("%w\ndebootstrap.log ends:\n%s", err, tail)
		}
		return err
	}
	// debootstrap leaves a copy of every package it installed in the
	// tree's apt archive, besides its cache (the build's archive). The
	// build never sees them (its archive is mounted over them for apt and
	// the steps) and slim removes them: they go now, so that a kept base
	// does not carry them.
	debs, _ := filepath.Glob(filepath.Join(b.root, "var", "cache", "apt", "archives", "*.deb"))
	for _, d := range debs {
		if err := os.Remove(d); err != nil {
			return err
		}
	}
	return nil
}

// aptInstall installs the recipe's apt packages inside the image.
func (b *builder) aptInstall(ctx context.Context) error {
	if len(b.r.AptPackages) == 0 {
		return nil
	}
	return b.withAptMounts(func() error {
		if err := b.chroot(ctx, "apt-get", "update", "-q"); err != nil {
			return err
		}
		args := append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends"}, b.r.AptPackages...)
		if err := b.chroot(ctx, args...); err != nil {
			if m := unknownPackage.FindStringSubmatch(err.Error()); m != nil {
				return fmt.Errorf("package %q: Debian %s has no package of that name (apt: %s): %w", m[1], b.r.Suite, m[0], err)
			}
			return err
		}
		return nil
	})
}

// withAptMounts runs fn with /proc mounted in the image and apt's archive
// cache bind-mounted from the build's own archive, so downloads are kept.
func (b *builder) withAptMounts(fn func() error) error {
	proc := filepath.Join(b.root, "proc")
	if err := b.mount("proc", proc, "proc", 0); err != nil {
		return err
	}
	defer b.unmount(proc)
	archives := filepath.Join(b.root, "var", "cache", "apt", "archives")
	if err := b.mount(b.debs, archives, "", syscall.MS_BIND); err != nil {
		return err
	}
	defer b.unmount(archives)
	return fn()
}

// unknownPackage is apt's line for a name it has no package of.
var unknownPackage = regexp.MustCompile(`E: Unable to locate package (\S+)`)

// mount mounts inside the image and remembers it, so cleanup unmounts it
// whatever happens.
func (b *builder) mount(src, dst, fstype string, flags uintptr) error {
	if st, err := os.Stat(dst); err != nil || st.IsDir() {
		// A file is bind-mounted onto the file that is there.
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	}
	if err := syscall.Mount(src, dst, fstype, flags, ""); err != nil {
		return fmt.Errorf("mount %s in the image: %w", filepath.Base(dst), err)
	}
	b.mounts = append(b.mounts, dst)
	return nil
}

func (b *builder) unmount(dst string) {
	if err := syscall.Unmount(dst, syscall.MNT_DETACH); err == nil {
		for i, m := range b.mounts {
			if m == dst {
				b.mounts = append(b.mounts[:i], b.mounts[i+1:]...)
				break
			}
		}
	}
}

// fileTail returns the last n lines of a file, or "".
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return lastLines(string(data), n)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stream runs a command and passes its output lines on as progress; the
// last lines go into the error when it fails.
func (b *builder) stream(ctx context.Context, name string, args ...string) error {
	cmd := command(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			tail = append(tail, line)
			if len(tail) > 12 {
				tail = tail[1:]
			}
			// debootstrap says "I: Retrieving/Validating/Extracting ..."
			// for every package: show the phase changes and warnings.
			if b.echo {
				b.progress("  | %s", line)
			} else if strings.HasPrefix(line, "W:") || strings.HasPrefix(line, "E:") || b.isPhase(line) {
				b.progress("  %s", line)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s: %w; last output:\n%s", name, err, strings.Join(tail, "\n"))
	}
	return nil
}

// isPhase picks the debootstrap lines worth showing: the first of each
// phase, and every 40th package within one (debootstrap says "I: Retrieving
// X", "I: Validating X" for every package).
func (b *builder) isPhase(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "I:" {
		return false
	}
	phase := f[1]
	if phase == "Validating" {
		phase = "Retrieving"
	}
	if phase != b.lastPhase {
		b.lastPhase, b.phaseLines = phase, 0
		return true
	}
	b.phaseLines++
	return b.phaseLines%40 == 0 && f[1] != "Validating"
}

func (b *builder) writeFiles() error {
	for _, f := range b.r.Files {
		path := filepath.Join(b.root, filepath.Clean("/"+f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		os.Remove(path)
		if f.Link != "" {
			if err := os.Symlink(f.Link, path); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(path, []byte(f.Content), fs.FileMode(f.Mode)); err != nil {
			return err
		}
		if err := os.Chmod(path, fs.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) kernelVersion() (string, error) {
	matches, _ := filepath.Glob(filepath.Join(b.root, "boot", "vmlinuz-*"))
	if len(matches) != 1 {
		return "", fmt.Errorf("want one kernel in the image's /boot, found %d", len(matches))
	}
	return strings.TrimPrefix(filepath.Base(matches[0]), "vmlinuz-"), nil
}

// pruneModules keeps only the modules the VM needs and their dependencies.
func (b *builder) pruneModules(ctx context.Context, kver string) error {
	modDir := filepath.Join(b.root, "lib", "modules", kver)
	f, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return err
	}
	mods, err := parseModulesDep(f)
	f.Close()
	if err != nil {
		return err
	}
	keep, missing := moduleClosure(mods, b.r.Modules)
	if len(missing) > 0 {
		b.progress("  not modules in this kernel (built in, or absent): %s", strings.Join(missing, ", "))
	}
	keepSet := map[string]bool{}
	for _, p := range keep {
		keepSet[p] = true
	}
	removed := 0
	err = filepath.WalkDir(filepath.Join(modDir, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(modDir, path)
		if !keepSet[rel] {
			removed++
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.progress("  kept %d modules, removed %d", len(keep), removed)
	return b.chroot(ctx, "depmod", "-a", kver)
}

// initramfs rebuilds the initramfs with only the modules the guest boots
// with. update-initramfs needs /proc, mounted for the step only.
func (b *builder) initramfs(ctx context.Context) error {
	proc := filepath.Join(b.root, "proc")
	if err := b.mount("proc", proc, "proc", 0); err != nil {
		return err
	}
	defer b.unmount(proc)
	return b.chroot(ctx, "update-initramfs", "-u", "-k", "all")
}

func (b *builder) chroot(ctx context.Context, args ...string) error {
	return b.stream(ctx, "chroot", append([]string{b.root}, args...)...)
}

// slim removes what a desktop VM never reads.
func (b *builder) slim() {
	for _, pattern := range []string{
		"var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/lib/apt/lists/*",
		"usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*",
		"var/log/*.log", "boot/System.map-*",
	} {
		matches, _ := filepath.Glob(filepath.Join(b.root, pattern))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
}

// makeDisk writes the root filesystem into an ext4 image (mkfs.ext4 -d, no
// loop mount) with room to spare, and converts it to qcow2, the base every
// snapshot's disk layers on.
func (b *builder) makeDisk(ctx context.Context) (int64, error) {
	used, err := treeSize(b.root)
	if err != nil {
		return 0, err
	}
	const gib = 1 << 30
	size := max(2*gib, used+used/4+gib)
	size = (size + 256<<20 - 1) / (256 << 20) * (256 << 20)
	if want := int64(b.r.DiskMiB) << 20; want > 0 {
		// The filesystem needs room for its own metadata and the
		// guest's first writes besides the files.
		if least := used + used/8 + 256<<20; want < least {
			return 0, fmt.Errorf("disk_mib %d is too small: the image's files take %d MiB; use at least %d", b.r.DiskMiB, used>>20, (least+1<<20-1)>>20)
		}
		size = want
	}
	raw := filepath.Join(b.dir, "root.ext4")
	b.progress("  %d MiB of files into a %d MiB filesystem", used>>20, size>>20)
	if err := b.stream(ctx, "mkfs.ext4", "-q", "-F", "-d", b.root, "-L", "warmdesk", "-E", b.r.MkfsExtended, raw, fmt.Sprint(size)); err != nil {
		return 0, err
	}
	disk := filepath.Join(b.dir, imageDisk)
	if err := b.stream(ctx, "qemu-img", "convert", "-O", "qcow2", raw, disk); err != nil {
		return 0, err
	}
	os.Remove(raw)
	// The base disk is never written again: every snapshot layers on it.
	os.Chmod(disk, 0o444)
	return size, nil
}

// cleanup removes the temporary build directory after a failure, after
// unmounting anything still mounted inside it. What the build downloaded
// is kept for the next.
func (b *builder) cleanup() {
	for _, m := range b.mounts {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if b.dir != "" {
		b.keepDebs()
		removeTree(b.dir)
	}
}

// keepDebs gives the packages this build downloaded to the shared archive
// and removes the build's own, which is not part of the image.
func (b *builder) keepDebs() {
	if b.debs == "" {
		return
	}
	if n, err := mergeDebs(b.debs, sharedDebs(b.opts.CacheDir)); err != nil {
		b.progress("  warning: the packages this build downloaded were not all kept for the next: %v", err)
	} else if n > 0 {
		b.progress("  %d packages this build downloaded kept for the next", n)
	}
	os.RemoveAll(b.debs)
	b.debs = ""
}

// cleanStale removes temporary directories that an interrupted build of
// this recipe left (the caller holds the recipe's lock), keeping the
// packages it had downloaded.
func cleanStale(cacheDir, root, hash string) {
	matches, _ := filepath.Glob(filepath.Join(root, ".tmp-"+hash+"-*"))
	for _, m := range matches {
		mergeDebs(filepath.Join(m, "debs"), sharedDebs(cacheDir))
	}
	trash, _ := filepath.Glob(filepath.Join(root, ".trash-*"))
	for _, m := range append(matches, trash...) {
		removeTree(m)
	}
}

// removeTree unmounts whatever is mounted below dir (an interrupted build
// may have left /proc mounted in the image) before removing it, so that
// removal never reaches into a mounted filesystem.
func removeTree(dir string) {
	for _, mp := range mountsBelow(dir) {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	if len(mountsBelow(dir)) > 0 {
		return // refuse rather than delete through a mount
	}
	os.RemoveAll(dir)
}

func mountsBelow(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return parseMountsBelow(string(data), dir)
}

// parseMountsBelow returns the mount points in mountinfo at or below dir,
// deepest first.
func parseMountsBelow(mountinfo, dir string) []string {
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func unescapeMountinfo(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func treeSize(root string) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lockFile takes an exclusive lock on path, waiting until ctx ends;
// waiting, when not nil, is called first if another process holds it.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return func() { f.Close() }, nil
	}
	if waiting != nil {
		waiting()
	}
	// The goroutine owns f: a blocked flock cannot be interrupted, so if
	// the caller gives up, the goroutine releases the lock once it gets it.
	got := make(chan error)
	abandoned := make(chan struct{})
	go func() {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		select {
		case got <- err:
		case <-abandoned:
			f.Close()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		close(abandoned)
		return nil, fmt.Errorf("waiting for another build of this image: %w", ctx.Err())
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// idleCommand runs name in the idle scheduling class (SCHED_IDLE, which
// everything it starts inherits) through chrt when chrt is found: a build
// on a serving host then takes only CPU time no desktop wants. Without
// chrt (path "") the command runs as it is.
func idleCommand(chrt, name string, args []string) (string, []string) {
	if chrt == "" {
		return name, args
	}
	return chrt, append([]string{"--idle", "0", name}, args...)
}

// idleChrt is chrt's path when it can set the idle scheduling class here
// (a sandbox may refuse it), else "": found and tried once.
var idleChrt = sync.OnceValue(func() string {
	chrt, err := exec.LookPath("chrt")
	if err != nil || exec.Command(chrt, "--idle", "0", "true").Run() != nil {
		return ""
	}
	return chrt
})

// command is exec.CommandContext in the idle scheduling class where it
// can be had.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	name, args = idleCommand(idleChrt(), name, args)
	return exec.CommandContext(ctx, name, args...)
}
