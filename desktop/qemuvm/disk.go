package qemuvm

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
	"syscall"

	"golang.org/x/sys/unix"
)

// CreateOverlay makes a qcow2 overlay at path on a backing qcow2, with
// qemu-img.
func CreateOverlay(ctx context.Context, qemuImg, path, backing string) error {
	if out, err := runTool(ctx, qemuImg, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", backing, path); err != nil {
		return fmt.Errorf("create disk overlay: %w: %s", err, out)
	}
	return nil
}

// CreateBlank makes an empty qcow2 disk of size bytes: the disk of a
// template that only receives a running desktop's RAM and never runs
// (clones use the desktop's frozen layer instead).
func CreateBlank(ctx context.Context, qemuImg, path string, size int64) error {
	if out, err := runTool(ctx, qemuImg, "create", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("template disk: %w: %s", err, out)
	}
	return nil
}

// runTool runs a host tool and returns its combined output on failure.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// NextOverlayPath names the overlay that goes on top of path:
// disk-0.qcow2 -> disk-1.qcow2.
func NextOverlayPath(path string) string {
	dir, base := filepath.Split(path)
	n := 0
	if s, ok := strings.CutPrefix(strings.TrimSuffix(base, ".qcow2"), "disk-"); ok {
		if v, err := strconv.Atoi(s); err == nil {
			n = v + 1
		}
	}
	return filepath.Join(dir, "disk-"+strconv.Itoa(n)+".qcow2")
}

// FreezeLayer puts a stopped machine's current disk overlay into a
// snapshot at snapDisk: a hard link, or a sparse copy across filesystems.
// QEMU flushed the overlay when the machine stopped, so the file is stable
// while it is copied. The machine must then move to a new overlay on top.
func FreezeLayer(disk, snapDisk string) error {
	err := os.Link(disk, snapDisk)
	if errors.Is(err, syscall.EXDEV) {
		err = CopySparse(disk, snapDisk)
	}
	if err != nil {
		return fmt.Errorf("freeze disk: %w", err)
	}
	return nil
}

// ChangeBackingFile rewrites the backing file name in the header of the
// image QEMU has open as node (change-backing-file; nothing else may
// write an image QEMU has open).
func ChangeBackingFile(ctx context.Context, ex Executor, node, backing string) error {
	args := map[string]string{"device": node, "image-node-name": node, "backing-file": backing}
	return ex.Execute(ctx, "change-backing-file", args, nil)
}

// BlockNode is a block node as query-block describes the one a device
// has inserted.
type BlockNode struct {
	NodeName string `json:"node-name"`
	Driver   string `json:"drv"`
	// File is the image's file name, or a json: pseudo-name when the
	// header's backing file differs from the backing node QEMU has open
	// (as after change-backing-file).
	File  string `json:"file"`
	Image struct {
		VirtualSize int64 `json:"virtual-size"`
	} `json:"image"`
}

// ActiveDisk is the block node the guest's disk (DiskDeviceID) reads and
// writes: the top of its backing chain, whatever the driver named it.
func ActiveDisk(ctx context.Context, ex Executor) (BlockNode, error) {
	var devices []struct {
		Device   string     `json:"device"`
		Qdev     string     `json:"qdev"`
		Inserted *BlockNode `json:"inserted"`
	}
	if err := ex.Execute(ctx, "query-block", nil, &devices); err != nil {
		return BlockNode{}, err
	}
	for _, d := range devices {
		// qdev is the device's id, or (for a virtio device) the QOM path
		// of its backend under the id.
		if d.Inserted != nil && (d.Qdev == DiskDeviceID || strings.Contains(d.Qdev, "/"+DiskDeviceID+"/")) {
			return *d.Inserted, nil
		}
	}
	return BlockNode{}, fmt.Errorf("no disk inserted in %s", DiskDeviceID)
}

// CopySparse copies a file, keeping its holes (SEEK_DATA/SEEK_HOLE), into
// a new file, synced.
func CopySparse(src, dst string) error {
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

// FreezeOwnership makes a frozen layer (the machine's file and the
// snapshot's name for it, one inode or a copy) root's and read-only.
func FreezeOwnership(paths ...string) error {
	if err := Root.Chown(paths...); err != nil {
		return err
	}
	for _, p := range paths {
		if err := os.Chmod(p, 0o444); err != nil {
			return err
		}
	}
	return nil
}
