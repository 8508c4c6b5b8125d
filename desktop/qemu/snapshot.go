package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Snapshot writes a golden snapshot of this machine into dir. A template
// (from Boot) is saved as it is and ends; a running desktop is copied into
// a new template process first and keeps running.
func (m *Machine) Snapshot(ctx context.Context, dir string, opts desktop.SnapshotOptions) (desktop.MachineShape, error) {
	rec := m.record()
	if rec.Template {
		return m.saveTemplate(ctx, dir, opts)
	}
	return m.snapshotRunning(ctx, dir, opts)
}

// saveTemplate stops a template, saves its device state without the shared
// RAM (x-ignore-shared: the RAM is already in the memory file) and ends it.
// The disk overlay is already in dir, where Boot put it; the memory file
// moves there from tmpfs.
func (m *Machine) saveTemplate(ctx context.Context, dir string, opts desktop.SnapshotOptions) (desktop.MachineShape, error) {
	rec := m.record()
	if filepath.Dir(rec.Disk) != filepath.Clean(dir) {
		return desktop.MachineShape{}, fmt.Errorf("%w: a template saves into the directory it booted with (%s)", desktop.ErrInvalid, filepath.Dir(rec.Disk))
	}
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	if err := m.saveState(ctx, filepath.Join(dir, desktop.FileState), true, ""); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	if err := m.quit(ctx); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	rec.Dirs.Remove()
	if err := placeMemory(rec.Memory, dir, opts.Ephemeral); err != nil {
		os.Remove(rec.Memory)
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	// The file is the snapshot's now (a fork template's is linked, not
	// moved): a later Destroy must not remove it.
	m.mu.Lock()
	m.rec.Memory = ""
	m.mu.Unlock()
	return rec.Shape, nil
}

// quit ends QEMU through its monitor and waits for the process.
func (m *Machine) quit(ctx context.Context) error {
	m.agent.close()
	m.qmp.Execute(ctx, "quit", nil, nil) // the connection may close before the answer
	if err := m.proc.waitExit(ctx); err != nil {
		return m.proc.kill(context.WithoutCancel(ctx))
	}
	m.qmp.Close()
	return nil
}

// snapshotRunning turns a running (or paused) desktop into a new golden
// snapshot in dir while it keeps running. Its RAM is a private mapping plus
// its own dirty pages, so it is written out whole once: the desktop is
// migrated into a new template process whose RAM is a fresh shared file in
// dir, and that template is then saved like a baked one. Its disk overlay is
// frozen into dir at the same instant, and the desktop goes on writing to a
// new overlay layered on it.
func (m *Machine) snapshotRunning(ctx context.Context, dir string, opts desktop.SnapshotOptions) (desktop.MachineShape, error) {
	rec := m.record()
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	start := time.Now()
	var phases []any
	phase := func(name string) { phases = append(phases, name, time.Since(start).Round(time.Millisecond)) }
	defer func() { m.log.Debug("snapshot of a running machine", phases...) }()
	disk, err := qemuvm.ActiveDisk(ctx, m.qmp)
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	// The template's memory file can take as much as the guest's RAM; a
	// shared mapping on a full filesystem would kill it mid-copy.
	mem := m.drv.templateMemory(dir)
	if err := qemuvm.SnapshotRoom(m.drv.opts.MemoryDir, rec.Shape.MemoryMiB); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	if !opts.Ephemeral {
		if err := qemuvm.SnapshotRoom(dir, rec.Shape.MemoryMiB); err != nil {
			return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
		}
	}
	placed := false
	defer func() {
		if !placed {
			os.Remove(mem)
		}
	}()
	// The template process starts before the desktop pauses, to keep the
	// pause short. Its disk is blank: it never runs, and clones will use
	// the frozen overlay instead.
	tmpl, err := m.drv.spawnTemplate(ctx, rec, mem, dir, disk.Image.VirtualSize)
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	defer tmpl.Destroy(context.WithoutCancel(ctx))
	phase("template_spawned")

	status, err := m.Status(ctx)
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	wasRunning := status == "running"
	// The guest's agent should see its host go before the snapshot, so
	// clones do not start mid-conversation with a host they never had.
	m.agent.disconnect(2 * time.Second)
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	desktop.Fault(desktop.FaultSnapshotSourceStopped)
	resumed := false
	resume := func() {
		if wasRunning && !resumed {
			resumed = true
			if err := m.qmp.Execute(context.WithoutCancel(ctx), "cont", nil, nil); err != nil {
				m.log.Error("resume after snapshot", "err", err)
			}
		}
	}
	defer resume()

	phase("stopped")
	if err := m.freezeDisk(ctx, filepath.Join(dir, desktop.FileDisk)); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := m.freezeVolumes(ctx, opts.VolumeTops); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	phase("disk_frozen")
	// Should the template die (out of space after all), stop waiting.
	mctx, mcancel := context.WithCancelCause(ctx)
	defer mcancel(nil)
	go func() {
		select {
		case <-tmpl.proc.done:
			mcancel(fmt.Errorf("the template QEMU %s", tmpl.proc.Reason()))
		case <-mctx.Done():
		}
	}()
	if err := migrateInto(mctx, m, tmpl); err != nil {
		if cause := context.Cause(mctx); cause != nil && cause != mctx.Err() {
			err = cause
		}
		return desktop.MachineShape{}, fmt.Errorf("snapshot: copy memory: %w", err)
	}
	phase("memory_copied")
	desktop.Fault(desktop.FaultSnapshotMemoryCopied)
	if !wasRunning {
		// A completed outgoing migration leaves the source's disks
		// inactive, and only cont activates them again; a paused desktop
		// left so would abort QEMU at its next block operation (a second
		// snapshot's freeze). So it runs for the moment between cont and
		// stop.
		if err := m.qmp.Execute(ctx, "cont", nil, nil); err == nil {
			m.qmp.Execute(ctx, "stop", nil, nil)
		}
	}
	resume()
	if err := tmpl.saveState(ctx, filepath.Join(dir, desktop.FileState), true, ""); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: save template: %w", err)
	}
	phase("state_saved")
	if err := tmpl.quit(ctx); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	phase("template_ended")
	if freed, err := sparsify(mem); err != nil {
		m.log.Warn("could not punch the zero pages out of a template's memory", "err", err)
	} else {
		m.log.Debug("template memory sparsified", "freed_mb", freed>>20)
	}
	phase("memory_sparsified")
	if err := placeMemory(mem, dir, opts.Ephemeral); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	placed = true
	phase("memory_placed")
	return rec.Shape, nil
}

// spawnTemplate starts a QEMU with the same devices as rec, RAM in a new
// shared file, waiting for an incoming migration, for the snapshot draft
// in draft.
func (d *Driver) spawnTemplate(ctx context.Context, src record, memPath, draft string, diskSize int64) (*Machine, error) {
	id := desktop.NewID("tmpl-")
	dirs, err := d.machineDirs(id)
	if err != nil {
		return nil, err
	}
	rec := record{ID: id, Dirs: dirs, Shape: src.Shape, Disk: dirs.Path("blank.qcow2"), DiskNode: qemuvm.DiskNodeID, Template: true}
	err = markDraft(dirs.RunDir, draft)
	if err == nil {
		err = qemuvm.CreateBlank(ctx, d.opts.QemuImg, rec.Disk, diskSize)
	}
	if err == nil {
		rec.Volumes, err = d.templateVolumes(ctx, src.Volumes, filepath.Dir(rec.Disk))
	}
	if err != nil {
		rec.Remove()
		return nil, err
	}
	m, err := d.start(ctx, rec, func(c *Config) {
		c.Memory = qemuvm.Memory{Path: memPath, Share: true}
		c.Incoming = true
	})
	if err != nil {
		rec.Remove()
		os.Remove(memPath)
		return nil, err
	}
	return m, nil
}

// migrateInto moves a stopped machine's whole state (RAM included) into a
// QEMU waiting with -incoming defer, over a socketpair handed to both.
func migrateInto(ctx context.Context, src, dst *Machine) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	if err := dst.qmp.SendFD(ctx, "in", fds[1]); err != nil {
		return err
	}
	in, err := qemuvm.StartMigration(ctx, dst.monitor(), qemuvm.Migration{Incoming: true, URI: "fd:in", Log: dst.rec.Path("qemu.log")})
	if err != nil {
		return err
	}
	defer in.Close()
	if err := src.qmp.SendFD(ctx, "out", fds[0]); err != nil {
		return err
	}
	out, err := qemuvm.StartMigration(ctx, src.monitor(), qemuvm.Migration{URI: "fd:out"})
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Wait(ctx); err != nil {
		return err
	}
	if err := in.Wait(ctx); err != nil {
		return err
	}
	var st, params json.RawMessage
	src.qmp.Execute(ctx, "query-migrate", nil, &st)
	src.qmp.Execute(ctx, "query-migrate-parameters", nil, &params)
	src.log.Debug("migration into a template", "stats", string(st), "params", string(params))
	return nil
}

// freezeDisk makes the machine's current disk overlay read-only and part of
// the snapshot (a hard link into dir, or a copy across filesystems), and
// switches the machine to a new overlay on top of it.
func (m *Machine) freezeDisk(ctx context.Context, snapDisk string) error {
	rec := m.record()
	if err := qemuvm.FreezeLayer(rec.Disk, snapDisk); err != nil {
		return err
	}
	// A frozen layer is the snapshot's, shared by its clones: root's, and
	// read-only even to root's tools. QEMU reopens it read-only by name.
	// Undone if the switch to a new overlay fails: the disk stays the
	// machine's and in use.
	unfreeze := func() {
		os.Remove(snapDisk)
		if err := rec.owner().Give(rec.Disk); err != nil {
			m.log.Error("give a disk whose freeze failed back to its machine", "err", err)
		}
	}
	if err := qemuvm.FreezeOwnership(rec.Disk, snapDisk); err != nil {
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	next := qemuvm.NextOverlayPath(rec.Disk)
	node := nextNodeName(rec.DiskNode)
	// The new overlay's backing is the machine's own (now frozen) file, by
	// its own path, so the machine never depends on where the snapshot is.
	if err := m.drv.createOverlay(ctx, next, rec.Disk); err != nil {
		unfreeze()
		return err
	}
	// QEMU, as the machine's user, opens the new overlay by name.
	if err := rec.owner().Give(next); err != nil {
		os.Remove(next)
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	add := map[string]any{
		"driver": "qcow2", "node-name": node, "discard": "unmap",
		"file":    map[string]any{"driver": "file", "filename": next},
		"backing": nil,
	}
	if err := m.qmp.Execute(ctx, "blockdev-add", add, nil); err != nil {
		os.Remove(next)
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	if err := m.qmp.Execute(ctx, "blockdev-snapshot", map[string]string{"node": rec.DiskNode, "overlay": node}, nil); err != nil {
		m.qmp.Execute(ctx, "blockdev-del", map[string]string{"node-name": node}, nil)
		os.Remove(next)
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	m.mu.Lock()
	m.rec.Frozen = rec.Disk
	m.rec.Disk, m.rec.DiskNode = next, node
	m.mu.Unlock()
	if m.jail != nil {
		m.jail.setDisk(next)
	}
	// The bound follows the disk to its new top overlay.
	if err := m.armDiskBound(ctx); err != nil {
		m.log.Warn("disk bound not armed on the new overlay", "err", err)
	}
	return nil
}

// AdoptSnapshot points the top overlay's backing file at the committed
// snapshot's copy of the frozen layer (the same file, hard-linked or
// copied), through QEMU itself (change-backing-file rewrites the header of
// an image QEMU has open), and drops the desktop's own name for it. Without
// this a second snapshot's disk would name a file in this desktop's
// directory, which goes when the desktop is deleted.
func (m *Machine) AdoptSnapshot(ctx context.Context, s desktop.Snapshot) error {
	rec := m.record()
	if rec.Template || rec.Frozen == "" {
		return nil
	}
	if err := qemuvm.ChangeBackingFile(ctx, m.qmp, rec.DiskNode, s.Path(desktop.FileDisk)); err != nil {
		return fmt.Errorf("adopt snapshot %s: %w", s.Name, err)
	}
	os.Remove(rec.Frozen)
	m.mu.Lock()
	m.rec.Frozen = ""
	m.mu.Unlock()
	return nil
}

// Hibernate writes the whole machine state, RAM included, to its data
// directory and ends QEMU. The desktop's RAM stops being shared with its
// snapshot: a woken desktop owns all its memory.
func (m *Machine) Hibernate(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	status, err := m.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	// Written under another name and renamed once synced: a hibernation
	// state under its own name is whole, which is what recovery trusts
	// when a crash ends hostd between QEMU's end and the record.
	err = qemuvm.SaveWhole(m.rec.Path(qemuvm.HibernateState), func(partial string) error {
		return m.saveState(ctx, partial, false, desktop.FaultHibernateMigrating)
	})
	if err != nil {
		if status == "running" {
			m.qmp.Execute(context.WithoutCancel(ctx), "cont", nil, nil)
		}
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	desktop.Fault(desktop.FaultHibernateStateWritten)
	if err := m.quit(ctx); err != nil {
		// QEMU lives on: its whole state must not stay beside it (see
		// the libvirt driver's Hibernate).
		m.rec.RemoveHibernation()
		if status == "running" {
			m.qmp.Execute(context.WithoutCancel(ctx), "cont", nil, nil)
		}
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	m.mu.Lock()
	m.rec = hibernatedRecord(m.rec, m.log)
	m.mu.Unlock()
	return m.Record(), nil
}

// hibernatedRecord is rec once its QEMU has ended with its state saved:
// no process, no run directory, and its files root's, its user id back in
// the range until a wake hands it a new one, so no later machine given
// the same id can reach them.
func hibernatedRecord(rec record, log *slog.Logger) record {
	os.RemoveAll(rec.RunDir)
	if err := qemuvm.Root.Chown(rec.DataDir, rec.Disk); err != nil {
		log.Warn("hibernated machine's files keep their owner", "err", err)
	}
	rec.Hibernated, rec.HibernateFile = true, rec.Path(qemuvm.HibernateState)
	rec.Pid, rec.StartTime = 0, 0
	rec.UID, rec.Cgroup = 0, nil
	return rec
}

// wake restores a hibernated machine from its own full state.
func (d *Driver) wake(ctx context.Context, spec desktop.RestoreSpec) (desktop.Machine, error) {
	var rec record
	if err := json.Unmarshal(spec.Hibernated, &rec); err != nil || !rec.Hibernated {
		return nil, fmt.Errorf("%w: not a hibernated machine's record", desktop.ErrInvalid)
	}
	if err := os.Mkdir(rec.RunDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("wake: %w", err)
	}
	// Every layer above the first was frozen into a snapshot; QEMU opens the
	// top one and finds the rest through its backing chain.
	rec.DiskNode = qemuvm.DiskNodeID
	m, err := d.start(ctx, rec, func(c *Config) {
		c.Memory = qemuvm.Memory{} // anonymous: the RAM comes from the saved state
		c.Incoming = true
	})
	if err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	// Paused until Committed: a guest that ran before the record named
	// it would move its disk on from the state a crash would wake it from
	// again.
	if err := m.restore(ctx, rec.HibernateFile, false, true); err != nil {
		// Keep the saved state: a later wake may succeed.
		m.proc.kill(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("wake: %w", err)
	}
	if err := m.armDiskBound(ctx); err != nil {
		m.proc.kill(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("wake: %w", err)
	}
	m.mu.Lock()
	m.wokeFrom = rec.HibernateFile
	m.rec.Hibernated, m.rec.HibernateFile = false, ""
	m.mu.Unlock()
	return m, nil
}

// Committed runs a woken machine's guest and removes the state it woke
// from, now that the Manager's record names the running machine.
func (m *Machine) Committed(ctx context.Context) error {
	m.mu.Lock()
	path, moved := m.wokeFrom, m.movedIn
	m.wokeFrom, m.movedIn = "", false
	m.mu.Unlock()
	if moved {
		// Resume arms the disk bound; cont activates the disk, whose
		// overlay the move finished writing.
		return m.Resume(ctx)
	}
	if path == "" {
		return nil
	}
	// Gone before the guest runs: a crash after this finds a stopped
	// machine and no state, and resumes it.
	if err := qemuvm.RemoveWokenState(path); err != nil {
		return fmt.Errorf("wake: remove the state it woke from: %w", err)
	}
	if err := m.qmp.Execute(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("wake: start guest: %w", err)
	}
	return nil
}
