package volume

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Export streams a tar of a volume's files. The caller has checked that no
// desktop writes it. The volume is read on the host without a mount: its
// layers are flattened into a sparse raw file, the journal replayed there
// (a desktop that crashed leaves one), and debugfs copies the tree out.
func (r *Registry) Export(ctx context.Context, name string, w io.Writer) error {
	v, err := r.Get(name)
	if err != nil {
		return err
	}
	if v.Damaged != "" {
		return fmt.Errorf("%w: volume %s failed its check (%s)", ErrDamaged, name, v.Damaged)
	}
	work, err := os.MkdirTemp(r.tmpDir(), "export-*")
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer os.RemoveAll(work)
	raw := filepath.Join(work, "fs.raw")
	if out, err := run(ctx, r.cfg.Tools.QemuImg, "convert", "-q", "-f", "qcow2", "-O", "raw", v.Top(), raw); err != nil {
		return fmt.Errorf("volume %s: flatten: %w: %s", name, err, out)
	}
	if err := replayJournal(ctx, raw); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	// The filesystem is the guest's to shape. A full check first refuses
	// what debugfs should never be handed (names with '/', broken
	// directories); then debugfs, which writes the tree on the host, runs
	// as nobody, so an entry that slipped through cannot write where
	// hostd could.
	if out, err := exec.CommandContext(ctx, "e2fsck", "-fn", raw).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: volume %s fails a filesystem check; its files are not exported (attach it to a desktop and run fsck there): %s", ErrDamaged, name, firstLine(strings.TrimSpace(string(out))))
	}
	tree := filepath.Join(work, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return err
	}
	if err := rdumpAsNobody(ctx, r.cfg.Tools.Debugfs, raw, tree); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	os.Remove(raw)
	return writeTar(w, tree)
}

// nobody is the user debugfs runs as for an export.
const nobody = 65534

// rdumpAsNobody copies the filesystem in raw into tree with debugfs, as
// the user nobody when hostd is root. nobody cannot pass through hostd's
// directories, so the image and the tree are handed over as descriptors
// (/proc/self/fd/N reaches them whatever their parents allow).
func rdumpAsNobody(ctx context.Context, debugfs, raw, tree string) error {
	img, err := os.Open(raw)
	if err != nil {
		return err
	}
	defer img.Close()
	if os.Geteuid() == 0 {
		if err := os.Chown(tree, nobody, nobody); err != nil {
			return err
		}
	}
	dir, err := os.Open(tree)
	if err != nil {
		return err
	}
	defer dir.Close()
	cmd := exec.CommandContext(ctx, debugfs, "-R", "rdump / /proc/self/fd/4", "/proc/self/fd/3")
	cmd.ExtraFiles = []*os.File{img, dir}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("debugfs: %w: %s", err, firstLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// replayJournal replays an ext4 journal a crash left, in a raw image.
func replayJournal(ctx context.Context, raw string) error {
	out, err := exec.CommandContext(ctx, "e2fsck", "-p", "-E", "journal_only", raw).CombinedOutput()
	var ee *exec.ExitError
	// Exit 1: errors corrected (the journal replayed).
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() > 1) {
		return fmt.Errorf("e2fsck: %w: %s", err, firstLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// writeTar writes the tree under root as a tar, without lost+found.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if rel == "lost+found" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() && link == "" {
			return nil // devices, fifos and sockets are not carried
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return tw.Close()
}

// Import fills a volume that was never written from a tar: the files are
// unpacked on the host and a new filesystem is made from them (mkfs.ext4
// -d), replacing the blank one. The caller has checked that no desktop
// holds it. A tar larger than the volume, or with a path that leaves it,
// is refused and the volume stays as it was.
func (r *Registry) Import(ctx context.Context, name string, rd io.Reader) error {
	v, err := r.Get(name)
	if err != nil {
		return err
	}
	if v.Frozen || v.Filled || len(v.Layers) != 1 {
		return fmt.Errorf("%w: volume %s has been written (or starts from a snapshot): an archive fills only a new, blank volume; create one and fill it", ErrConflict, name)
	}
	work, err := os.MkdirTemp(r.tmpDir(), "import-*")
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer os.RemoveAll(work)
	tree := filepath.Join(work, "tree")
	if err := untar(rd, tree, int64(v.SizeMiB)<<20); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	next := r.newLayerPath()
	if err := r.format(ctx, next, v.SizeMiB, tree); err != nil {
		return fmt.Errorf("volume %s: %w (does the archive fit in %d MiB?)", name, err, v.SizeMiB)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, err := r.getLocked(name)
	if err != nil || cur.Filled || len(cur.Layers) != 1 {
		os.Remove(next)
		return fmt.Errorf("%w: volume %s changed while it was filled", ErrConflict, name)
	}
	old := cur.Top()
	cur.Layers, cur.Filled = []string{next}, true
	if err := r.cfg.Store.PutVolume(cur); err != nil {
		os.Remove(next)
		return fmt.Errorf("volume %s: record: %w", name, err)
	}
	r.vols[name] = cur
	os.Remove(old)
	return nil
}

// untar unpacks regular files, directories and symbolic links under dst,
// refusing paths that leave it and more than limit bytes of content.
func untar(rd io.Reader, dst string, limit int64) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	// Through os.Root: an entry below a symbolic link the archive made
	// cannot reach outside dst.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(rd)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: archive: %w: send a tar (not compressed)", ErrInvalid, err)
		}
		name, err := archivePath(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		p := filepath.FromSlash(name)
		if dir := filepath.Dir(p); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%w: archive: %s: %w", ErrInvalid, name, err)
			}
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(p, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if total > limit {
				return fmt.Errorf("%w: archive: its files pass the volume's size of %d MiB; make a larger volume", ErrInvalid, limit>>20)
			}
			f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("%w: archive: %s: %w", ErrInvalid, name, err)
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			// The link is stored as it is; it is read in the guest, where
			// it points inside the guest, never on the host.
			if err := root.Symlink(h.Linkname, p); err != nil {
				return fmt.Errorf("%w: archive: %s: %w", ErrInvalid, name, err)
			}
		default:
			return fmt.Errorf("%w: archive: %s: only files, directories and symbolic links are carried", ErrInvalid, name)
		}
	}
}

// archivePath cleans an entry's name; "" is the root itself.
func archivePath(name string) (string, error) {
	clean := path.Clean("/" + strings.TrimPrefix(name, "./"))
	if strings.Contains(name, "\x00") || hasDotDot(name) {
		return "", fmt.Errorf("%w: archive: entry %q leaves the volume", ErrInvalid, name)
	}
	clean = strings.TrimPrefix(clean, "/")
	if clean == "lost+found" || strings.HasPrefix(clean, "lost+found/") {
		return "", fmt.Errorf("%w: archive: entry %q: lost+found belongs to the filesystem", ErrInvalid, name)
	}
	return clean, nil
}

func hasDotDot(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
