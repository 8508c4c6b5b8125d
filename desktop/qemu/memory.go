package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// defaultMemoryDir is a directory on /dev/shm of the catalog's own, so
// hosts of different catalogs (a test's, the daemon's) never sweep each
// other's files.
func defaultMemoryDir(snapshotsDir string) string {
	name := "unswept"
	if snapshotsDir != "" {
		name = dirTag(snapshotsDir)
	}
	return filepath.Join("/dev/shm", "warmdesk", name)
}

// dirTag names a directory in 12 hex digits (of its absolute path's
// SHA-256): what sets apart the shared places (tmpfs, cgroups) of two
// hostd on one machine.
func dirTag(dir string) string {
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// templateMemory names the tmpfs file for the RAM of a template whose
// snapshot is written into dir (a catalog draft): named after the draft, so
// a sweep can tell whether it is still wanted.
func (d *Driver) templateMemory(dir string) string {
	return filepath.Join(d.opts.MemoryDir, filepath.Base(dir)+".memory")
}

// placeMemory puts a finished template's RAM file into the snapshot: moved
// to disk for a golden snapshot (copied sparse and synced: tmpfs does not
// survive a reboot, the snapshot must), or linked for a fork template,
// whose desktops a reboot ends anyway.
func placeMemory(tmp, dir string, ephemeral bool) error {
	dst := filepath.Join(dir, desktop.FileMemory)
	if ephemeral {
		return os.Symlink(tmp, dst)
	}
	if err := qemuvm.CopySparse(tmp, dst); err != nil {
		return fmt.Errorf("move the template's memory to disk: %w", err)
	}
	return os.Remove(tmp)
}

// dropMemory removes a template's RAM file that its snapshot never took:
// a bake that failed or was cancelled before its save leaves it on tmpfs
// (as large as the guest's RAM), where only the next driver start's sweep
// would find it. A saved template's record no longer names it.
func (r record) dropMemory() {
	if r.Template && r.Memory != "" {
		os.Remove(r.Memory)
	}
}

// sweepMemory removes template memory files that neither a snapshot (by
// its memory link) nor a live draft refers to: what a crash mid-bake or
// mid-fork left on tmpfs. The templates such a crash left running go
// first: a removed file's pages stay while a QEMU maps them.
func (d *Driver) sweepMemory(ctx context.Context) {
	d.endOrphanTemplates(ctx)
	if d.opts.SnapshotsDir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(d.opts.MemoryDir, "*.memory"))
	if len(files) == 0 {
		return
	}
	wanted := map[string]bool{}
	entries, _ := os.ReadDir(d.opts.SnapshotsDir)
	for _, e := range entries {
		dir := filepath.Join(d.opts.SnapshotsDir, e.Name())
		if target, err := os.Readlink(filepath.Join(dir, desktop.FileMemory)); err == nil {
			wanted[target] = true
		}
		if strings.HasPrefix(e.Name(), ".draft-") && desktop.DraftInUse(dir) {
			wanted[d.templateMemory(dir)] = true
		}
	}
	for _, f := range files {
		if !wanted[f] {
			d.log.Info("removing a template memory file nothing refers to", "file", f)
			os.Remove(f)
		}
	}
}

// endOrphanTemplates ends the bakes and snapshot templates whose process
// is gone: a bake killed mid-boot leaves its QEMU (in a session of its
// own) running its guest on the RAM file, until the next hostd start's
// Sweep. Only those whose draft marker names a draft no live process
// holds: the marker is written after the draft is taken, so a machine
// being set up (no marker yet) is left alone, and the draft is given up
// only after its machine has ended.
func (d *Driver) endOrphanTemplates(ctx context.Context) {
	entries, _ := os.ReadDir(d.opts.RunDir)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "bake-") && !strings.HasPrefix(name, "tmpl-") {
			continue
		}
		draft, err := os.ReadFile(filepath.Join(d.opts.RunDir, name, draftMarker))
		if err != nil || desktop.DraftInUse(string(draft)) {
			continue
		}
		var errs []error
		if d.sweepMachine(ctx, name, &errs) {
			d.log.Info("ended a bake or snapshot template whose process is gone", "machine", name, "draft", string(draft))
		}
		if err := errors.Join(errs...); err != nil {
			d.log.Warn("a bake or snapshot template whose process is gone did not end", "machine", name, "err", err)
		}
	}
}
