package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// nextOverlayPath names the overlay that goes on top of path:
// disk-0.qcow2 -> disk-1.qcow2.
func nextOverlayPath(path string) string {
	dir, base := filepath.Split(path)
	n := 0
	if s, ok := strings.CutPrefix(strings.TrimSuffix(base, ".qcow2"), "disk-"); ok {
		if v, err := strconv.Atoi(s); err == nil {
			n = v + 1
		}
	}
	return filepath.Join(dir, "disk-"+strconv.Itoa(n)+".qcow2")
}

// nextNodeName names the block node of the next overlay: disk0 -> disk1.
func nextNodeName(node string) string {
	n := 0
	if v, err := strconv.Atoi(strings.TrimPrefix(node, "disk")); err == nil {
		n = v
	}
	return "disk" + strconv.Itoa(n+1)
}

// runTool runs a host tool and returns its combined output on failure.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// copySparse copies a file, keeping its holes (SEEK_DATA/SEEK_HOLE), into a
// new file.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		out.Close()
		if !ok {
			os.Remove(dst)
		}
	}()
	size := info.Size()
	var off int64
	for off < size {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	ok = true
	return nil
}
