package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// copyFiles writes the recipe's files into the image tree. Paths are
// opened through an os.Root of the tree, so a symbolic link in the image
// cannot send a copy outside it; each file's content is checked against
// the digest the recipe was hashed with.
func (b *builder) copyFiles(ctx context.Context) error {
	if len(b.r.Copies) == 0 {
		return nil
	}
	root, err := os.OpenRoot(b.root)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, c := range b.r.Copies {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyInto(root, c); err != nil {
			return fmt.Errorf("copy %s to %s: %w", c.Src, c.Dst, err)
		}
	}
	for _, c := range b.r.Copies {
		if c.Owner == "" {
			continue
		}
		// chown inside the tree: the owner's name is the image's user.
		// chown clears setuid and setgid, so the mode is set again after.
		if err := b.chroot(ctx, "chown", c.Owner, c.Dst); err != nil {
			return fmt.Errorf("owner %s of %s: %w", c.Owner, c.Dst, err)
		}
		if err := root.Chmod(c.Dst[1:], fs.FileMode(c.Mode&0o777)|setBits(c.Mode)); err != nil {
			return fmt.Errorf("mode of %s: %w", c.Dst, err)
		}
	}
	return nil
}

func copyInto(root *os.Root, c Copy) error {
	rel := c.Dst[1:]
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	src, err := os.Open(c.Src)
	if err != nil {
		return err
	}
	defer src.Close()
	root.Remove(rel)
	dst, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(c.Mode)&fs.ModePerm)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(dst, h), src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != c.Digest {
		return fmt.Errorf("it changed since the recipe was read: build again")
	}
	// OpenFile's mode went through the umask; set bits too (setuid,
	// sticky) are the recipe's to give.
	return root.Chmod(rel, fs.FileMode(c.Mode&0o777)|setBits(c.Mode))
}

func setBits(mode uint32) fs.FileMode {
	var m fs.FileMode
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// buildSteps runs the recipe's shell steps in the image tree as root, with
// /proc mounted and apt's archive cache shared with the build cache. Their
// output is shown as it comes.
func (b *builder) buildSteps(ctx context.Context) error {
	if len(b.r.BuildSteps) == 0 {
		return nil
	}
	// The image's resolv.conf names QEMU's guest DNS (10.0.2.3), which
	// the build host does not have: a step resolves names as the host
	// does, through the host's file mounted over it for the steps.
	resolv := filepath.Join(b.root, "etc", "resolv.conf")
	if err := b.mount("/etc/resolv.conf", resolv, "", syscall.MS_BIND); err != nil {
		return err
	}
	defer b.unmount(resolv)
	b.echo = true
	defer func() { b.echo = false }()
	return b.withAptMounts(func() error {
		for i, step := range b.r.BuildSteps {
			b.progress("  step %d: %s", i+1, oneLine(step))
			if err := b.chroot(ctx, "/bin/sh", "-ec", step); err != nil {
				return fmt.Errorf("build step %d of %d (%s): %w", i+1, len(b.r.BuildSteps), oneLine(step), err)
			}
		}
		return nil
	})
}

// oneLine shortens a shell step for a progress line.
func oneLine(s string) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' {
			r = append(r[:i:i], []rune(" ...")...)
			break
		}
	}
	if len(r) > 80 {
		r = append(r[:77:77], []rune("...")...)
	}
	return string(r)
}
