package qemuvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warmdesk/warmdesk/desktop"
)

// Dirs are one machine's directories, both 0700. Drivers embed them in
// their machine records.
type Dirs struct {
	RunDir  string `json:"run_dir"`  // sockets
	DataDir string `json:"data_dir"` // disk overlays, logs, saved state
}

// Path names a machine file: sockets (*.sock) in the run directory, whose
// paths must stay short, everything else in the data directory.
func (d Dirs) Path(name string) string {
	if filepath.Ext(name) == ".sock" {
		return filepath.Join(d.RunDir, name)
	}
	return filepath.Join(d.DataDir, name)
}

// MakeDirs makes a machine's run and data directories (0700) under the two
// roots; on failure neither is left.
func MakeDirs(runRoot, dataRoot, id string) (Dirs, error) {
	d := Dirs{RunDir: filepath.Join(runRoot, id), DataDir: filepath.Join(dataRoot, id)}
	for _, dir := range []string{d.RunDir, d.DataDir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			os.RemoveAll(d.RunDir)
			return Dirs{}, fmt.Errorf("machine directory: %w", err)
		}
	}
	return d, nil
}

// Remove removes the machine's directories and everything in them.
func (d Dirs) Remove() error {
	var errs []error
	for _, dir := range []string{d.RunDir, d.DataDir} {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove machine files: %w", errors.Join(errs...))
	}
	return nil
}

// SnapshotRoom fails with ErrCapacity when dir's filesystem cannot hold
// the RAM of a machine of memoryMiB (plus 64 MiB of device state and
// slack): the template a snapshot of a running machine goes through
// writes all of it, and a shared mapping on a full filesystem would kill
// that QEMU mid-copy.
func SnapshotRoom(dir string, memoryMiB int) error {
	need := int64(memoryMiB)<<20 + 64<<20
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if free := int64(st.Bavail) * st.Bsize; free < need {
		return fmt.Errorf("%w: not enough space in %s: a snapshot of this desktop needs up to %d MiB (its memory), there are %d MiB free", desktop.ErrCapacity, dir, need>>20, free>>20)
	}
	return nil
}
