package qemu

import (
	"context"
	"fmt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// The full-state path: a machine whose state file holds all of its RAM and
// whose memory is anonymous, sharing nothing. Wake uses it for hibernated
// desktops; the benchmark harness uses these two exported functions to
// compare it with the copy-on-write restore.

// SaveFullState stops a machine and writes its whole state, RAM included,
// to path. The machine stays stopped.
func (m *Machine) SaveFullState(ctx context.Context, path string) error {
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return fmt.Errorf("save full state: %w", err)
	}
	if err := m.saveState(ctx, path, false, ""); err != nil {
		return fmt.Errorf("save full state: %w", err)
	}
	return nil
}

// RestoreFullState starts a machine with anonymous RAM and a new disk
// overlay on s's disk, and loads a full state file (from SaveFullState of
// a clone of s) into it.
func (d *Driver) RestoreFullState(ctx context.Context, id string, s desktop.Snapshot, statePath string) (desktop.Machine, error) {
	if err := d.checkSnapshot(s); err != nil {
		return nil, err
	}
	dirs, err := d.machineDirs(id)
	if err != nil {
		return nil, err
	}
	rec := record{
		ID: id, Dirs: dirs, Snapshot: s.Name,
		Shape: s.Manifest.Machine, Disk: dirs.Path("disk-0.qcow2"), DiskNode: qemuvm.DiskNodeID,
	}
	if err := d.createOverlay(ctx, rec.Disk, s.Path(desktop.FileDisk)); err != nil {
		rec.Remove()
		return nil, err
	}
	m, err := d.start(ctx, rec, func(c *Config) {
		c.Memory = qemuvm.Memory{}
		c.Incoming = true
	})
	if err != nil {
		rec.Remove()
		return nil, err
	}
	if err := m.restore(ctx, statePath, false, false); err != nil {
		m.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	return m, nil
}
