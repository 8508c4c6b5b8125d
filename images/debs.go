package images

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Downloaded packages are kept in one archive of the cache, shared by
// every build. A build never works in it: debootstrap and apt write into
// an archive of the build's own, seeded with hard links from the shared
// one, and what the build downloaded goes back when it ends. So builds of
// different recipes run side by side: apt's lock is in each build's own
// archive, and no two builds download into one file.

// sharedDebs is the shared archive of downloaded packages.
func sharedDebs(cacheDir string) string { return filepath.Join(cacheDir, "debs") }

// seedDebs fills a build's archive with the shared archive's packages
// (links, or copies across filesystems) and returns how many. The partial
// directory makes debootstrap download into it and move a package into
// the archive only once its checksum is right, as apt does: the archive
// then never holds a part of a package to give back.
func seedDebs(shared, own string) (int, error) {
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return 0, fmt.Errorf("package archive: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(own, "partial"), 0o755); err != nil {
		return 0, fmt.Errorf("package archive: %w", err)
	}
	debs, err := archived(shared)
	if err != nil {
		return 0, err
	}
	for _, name := range debs {
		if err := linkOrCopy(filepath.Join(shared, name), filepath.Join(own, name)); err != nil {
			return 0, fmt.Errorf("package archive: %w", err)
		}
	}
	return len(debs), nil
}

// mergeDebs puts into the shared archive each package of own that it does
// not hold as the same file, and returns how many. A package is renamed
// into place whole, so a build seeding meanwhile links either the old
// file or the new, each complete; a damaged one that debootstrap
// downloaded again is replaced.
func mergeDebs(own, shared string) (int, error) {
	debs, err := archived(own)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, name := range debs {
		src, dst := filepath.Join(own, name), filepath.Join(shared, name)
		a, err := os.Stat(src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			continue
		}
		tmp := filepath.Join(shared, ".in-"+randomHex()+"-"+name)
		if err := linkOrCopy(src, tmp); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// archived lists the complete packages of an archive.
func archived(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("package archive: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".deb" && e.Name()[0] != '.' {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// linkOrCopy makes dst the same file as src, or a copy of it where a link
// cannot be made (another filesystem).
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		return copyFile(src, dst)
	}
	return err
}

func randomHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
