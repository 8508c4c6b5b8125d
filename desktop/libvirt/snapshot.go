package libvirt

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Snapshot writes a golden snapshot of this machine into dir. A template
// (from Boot) is saved as it is and ends; a running desktop is copied into
// a new template domain first and keeps running.
func (m *Machine) Snapshot(ctx context.Context, dir string, opts desktop.SnapshotOptions) (desktop.MachineShape, error) {
	if len(opts.VolumeTops) > 0 {
		return desktop.MachineShape{}, fmt.Errorf("%w: the libvirt driver does not branch volumes on fork yet", desktop.ErrInvalid)
	}
	if m.record().Template {
		return m.saveTemplate(ctx, dir)
	}
	return m.snapshotRunning(ctx, dir)
}

// saveTemplate pauses a template, saves its device state without the shared
// RAM (x-ignore-shared: the RAM is already in the memory file) and ends its
// domain. The memory file and disk overlay are already in dir.
func (m *Machine) saveTemplate(ctx context.Context, dir string) (desktop.MachineShape, error) {
	rec := m.record()
	if filepath.Dir(rec.Disk) != filepath.Clean(dir) {
		return desktop.MachineShape{}, fmt.Errorf("%w: a template saves into the directory it booted with (%s)", desktop.ErrInvalid, filepath.Dir(rec.Disk))
	}
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	if err := m.Pause(ctx); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	if err := m.saveState(ctx, filepath.Join(dir, desktop.FileState), true, ""); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	if err := m.drv.destroyDomain(ctx, rec); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("save template: %w", err)
	}
	m.exit("was saved as a snapshot")
	rec.Dirs.Remove()
	return rec.Shape, nil
}

// snapshotRunning turns a running (or paused) desktop into a new golden
// snapshot in dir while it keeps running. Its RAM is a private mapping plus
// its own dirty pages, so it is written out whole once: the desktop is
// migrated into a new template domain whose RAM is a fresh shared file in
// dir, and that template is saved like a baked one. Its disk is frozen into
// dir at the same instant (a libvirt external disk snapshot onto a new
// overlay), and the desktop goes on writing to that overlay.
func (m *Machine) snapshotRunning(ctx context.Context, dir string) (desktop.MachineShape, error) {
	rec := m.record()
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	// The template writes the desktop's whole RAM into dir: a shared
	// mapping on a full filesystem would kill it mid-copy.
	if err := qemuvm.SnapshotRoom(dir, rec.Shape.MemoryMiB); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	node, err := qemuvm.ActiveDisk(ctx, m.monitor())
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	// The template starts before the desktop pauses, to keep the pause
	// short. Its disk is blank: it never runs; clones use the frozen layer.
	tmpl, err := m.drv.startTemplate(ctx, rec, filepath.Join(dir, desktop.FileMemory), node.Image.VirtualSize)
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	defer tmpl.Destroy(context.WithoutCancel(ctx))

	st, err := m.state(ctx)
	if err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	wasRunning := st == golibvirt.DomainRunning
	if wasRunning {
		if err := m.Pause(ctx); err != nil {
			return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
		}
	}
	desktop.Fault(desktop.FaultSnapshotSourceStopped)
	resumed := false
	resume := func() {
		if wasRunning && !resumed {
			resumed = true
			if err := m.resume(context.WithoutCancel(ctx)); err != nil {
				m.log.Error("resume after snapshot", "err", err)
			}
		}
	}
	defer resume()

	if err := m.freezeDisk(ctx, filepath.Join(dir, desktop.FileDisk)); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := migrateInto(ctx, m, tmpl); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: copy memory: %w", err)
	}
	desktop.Fault(desktop.FaultSnapshotMemoryCopied)
	if !wasRunning {
		// A completed outgoing migration leaves the source's disks
		// inactive, and only cont activates them again; a paused desktop
		// left so aborts QEMU at its next block operation (the
		// change-backing-file of AdoptSnapshot, or a second snapshot's
		// freeze). So it runs for the moment between resume and pause.
		if err := m.resume(ctx); err != nil {
			return desktop.MachineShape{}, fmt.Errorf("snapshot: reactivate the paused desktop's disks: %w", err)
		}
		if err := m.Pause(ctx); err != nil {
			return desktop.MachineShape{}, fmt.Errorf("snapshot: pause the desktop again: %w", err)
		}
	}
	resume()
	if err := tmpl.saveState(ctx, filepath.Join(dir, desktop.FileState), true, ""); err != nil {
		return desktop.MachineShape{}, fmt.Errorf("snapshot: save template: %w", err)
	}
	return rec.Shape, nil
}

// startTemplate starts a domain with the same machine as src, RAM in a new
// shared file, waiting for an incoming migration.
func (d *Driver) startTemplate(ctx context.Context, src record, memPath string, diskSize int64) (*Machine, error) {
	rec, err := d.newRecord(desktop.NewID("tmpl-"))
	if err != nil {
		return nil, err
	}
	rec.Shape, rec.Template = src.Shape, true
	rec.Disk = rec.Path("blank.qcow2")
	if err := os.WriteFile(filepath.Join(rec.RunDir, templateMarker), nil, 0o600); err != nil {
		rec.Remove()
		return nil, err
	}
	if err := qemuvm.CreateBlank(ctx, d.opts.QemuImg, rec.Disk, diskSize); err != nil {
		rec.Remove()
		return nil, err
	}
	m, err := d.start(ctx, rec, startSpec{role: RoleTemplate, memory: qemuvm.Memory{Path: memPath, Share: true}, incoming: true})
	if err != nil {
		rec.Remove()
		os.Remove(memPath)
		return nil, err
	}
	return m, nil
}

// snapshotXML is the disk-only external snapshot that puts overlay on top
// of the machine's disk (vda).
func snapshotXML(overlay string) ([]byte, error) {
	type source struct {
		File string `xml:"file,attr"`
	}
	type driver struct {
		Type string `xml:"type,attr"`
	}
	type disk struct {
		Name     string `xml:"name,attr"`
		Snapshot string `xml:"snapshot,attr"`
		Type     string `xml:"type,attr"`
		Driver   driver `xml:"driver"`
		Source   source `xml:"source"`
	}
	v := struct {
		XMLName xml.Name `xml:"domainsnapshot"`
		Disks   []disk   `xml:"disks>disk"`
	}{Disks: []disk{{Name: "vda", Snapshot: "external", Type: "file", Driver: driver{"qcow2"}, Source: source{overlay}}}}
	return xml.Marshal(v)
}

// freezeDisk makes the machine's current disk overlay read-only and part of
// the snapshot (a hard link into dir, or a copy across filesystems), and
// switches the machine to a new overlay on top of it with a libvirt
// disk-only external snapshot, so libvirt's view of the disk stays true.
func (m *Machine) freezeDisk(ctx context.Context, snapDisk string) error {
	rec := m.record()
	if err := qemuvm.FreezeLayer(rec.Disk, snapDisk); err != nil {
		return err
	}
	// Under a desktop's own id, as under the QEMU driver: the frozen layer
	// is the snapshot's, shared by its clones, root's and read-only; QEMU
	// reopens it read-only by name. The new overlay is the id's. Undone if
	// the switch fails: the disk stays the desktop's and in use.
	unfreeze := func() {
		os.Remove(snapDisk)
		if err := m.user.own(rec.Disk); err != nil {
			m.log.Error("give a disk whose freeze failed back to its desktop", "err", err)
		}
	}
	if m.user != nil {
		if err := qemuvm.FreezeOwnership(rec.Disk, snapDisk); err != nil {
			unfreeze()
			return fmt.Errorf("freeze disk: %w", err)
		}
	}
	next := qemuvm.NextOverlayPath(rec.Disk)
	// The new overlay's backing is the machine's own (now frozen) file, by
	// its own path, so the machine never depends on where the snapshot is.
	if err := m.drv.createOverlay(ctx, next, rec.Disk); err != nil {
		unfreeze()
		return err
	}
	// The id owns next from here, so a domain ending from now on gives
	// next back to root with the rest.
	if err := m.user.own(next); err != nil {
		os.Remove(next)
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	x, err := snapshotXML(next)
	if err != nil {
		os.Remove(next)
		unfreeze()
		return err
	}
	dom := m.domain()
	flags := uint32(golibvirt.DomainSnapshotCreateDiskOnly | golibvirt.DomainSnapshotCreateNoMetadata | golibvirt.DomainSnapshotCreateReuseExt)
	if _, err := call(ctx, m.drv.conn, func(l *golibvirt.Libvirt) (golibvirt.DomainSnapshot, error) {
		return l.DomainSnapshotCreateXML(dom, string(x), flags)
	}); err != nil {
		os.Remove(next)
		unfreeze()
		return fmt.Errorf("freeze disk: %w", err)
	}
	m.mu.Lock()
	m.rec.Frozen = rec.Disk
	m.rec.Disk = next
	m.mu.Unlock()
	// The bound follows the disk to its new top overlay.
	if err := m.armDiskBound(ctx); err != nil {
		m.log.Warn("disk bound not armed on the new overlay", "err", err)
	}
	return nil
}

// AdoptSnapshot points the top overlay's backing file at the committed
// snapshot's copy of the frozen layer, through QEMU (change-backing-file
// rewrites the header of an image QEMU has open; libvirt has no call for
// it), and drops the desktop's own name for that layer. Without this a
// later snapshot's disk would name a file in this desktop's directory,
// which goes when the desktop is deleted.
func (m *Machine) AdoptSnapshot(ctx context.Context, s desktop.Snapshot) error {
	rec := m.record()
	if rec.Template || rec.Frozen == "" {
		return nil
	}
	// libvirt names its nodes itself: the top one is the disk's.
	node, err := qemuvm.ActiveDisk(ctx, m.monitor())
	if err != nil {
		return fmt.Errorf("adopt snapshot %s: %w", s.Name, err)
	}
	if err := qemuvm.ChangeBackingFile(ctx, m.monitor(), node.NodeName, s.Path(desktop.FileDisk)); err != nil {
		return fmt.Errorf("adopt snapshot %s: %w", s.Name, err)
	}
	os.Remove(rec.Frozen)
	m.mu.Lock()
	m.rec.Frozen = ""
	m.mu.Unlock()
	return nil
}

// Hibernate writes the whole machine state, RAM included, to its data
// directory and ends the domain.
//
// This is hostd's own full-state migration rather than libvirt's managed
// save: managed save needs a persistent domain (hostd's are transient, so
// a failed hostd leaves no definitions behind), its image would carry the
// <qemu:commandline> that maps the snapshot's memory file and so keep the
// woken desktop tied to it, and its format is libvirt's. The file written
// here is the same QEMU migration stream the QEMU driver writes, and a
// woken desktop owns all of its memory.
func (m *Machine) Hibernate(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, qemuvm.SaveTimeout)
	defer cancel()
	st, err := m.state(ctx)
	if err != nil {
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	if st == golibvirt.DomainRunning {
		if err := m.Pause(ctx); err != nil {
			return nil, fmt.Errorf("hibernate: %w", err)
		}
	}
	rec := m.record()
	// Whole under its own name (qemuvm.SaveWhole): recovery trusts it when
	// a crash comes between the domain's end and the record.
	err = qemuvm.SaveWhole(rec.Path(qemuvm.HibernateState), func(partial string) error {
		return m.saveState(ctx, partial, false, desktop.FaultHibernateMigrating)
	})
	if err != nil {
		if st == golibvirt.DomainRunning {
			m.resume(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	desktop.Fault(desktop.FaultHibernateStateWritten)
	if err := m.drv.destroyDomain(ctx, rec); err != nil {
		// The domain lives on: its whole state must not stay beside it,
		// where recovery would take it for a hibernation and wake the
		// guest from it over a disk that has moved on.
		rec.RemoveHibernation()
		if st == golibvirt.DomainRunning {
			m.resume(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("hibernate: %w", err)
	}
	m.exit("was hibernated")
	m.mu.Lock()
	m.rec = hibernatedRecord(m.rec)
	m.mu.Unlock()
	return m.Record(), nil
}

// hibernatedRecord is rec once its domain has ended with its state saved
// whole: no run directory, no cgroup.
func hibernatedRecord(rec record) record {
	os.RemoveAll(rec.RunDir)
	rec.Hibernated, rec.HibernateFile = true, rec.Path(qemuvm.HibernateState)
	rec.Cgroup, rec.UID = nil, 0
	return rec
}

// wake restores a hibernated machine from its own full state, into a new
// domain with anonymous RAM.
func (d *Driver) wake(ctx context.Context, spec desktop.RestoreSpec) (desktop.Machine, error) {
	rec, err := parseRecord(spec.Hibernated)
	if err != nil || !rec.Hibernated {
		return nil, fmt.Errorf("%w: not a hibernated machine's record", desktop.ErrInvalid)
	}
	if err := os.Mkdir(rec.RunDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("wake: %w", err)
	}
	file := rec.HibernateFile
	rec.Hibernated, rec.HibernateFile = false, ""
	rec.UUID = newUUID() // a new domain
	m, err := d.start(ctx, rec, startSpec{role: RoleDesktop, incoming: true})
	if err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	// Paused until Committed: a guest that ran before the record named
	// it would move its disk on from the state a crash would wake it from
	// again.
	err = m.loadPaused(ctx, file, false)
	if err == nil {
		err = m.armDiskBound(ctx)
	}
	if err != nil {
		// Keep the saved state and the disk: a later wake may succeed.
		d.destroyDomain(context.WithoutCancel(ctx), rec)
		return nil, fmt.Errorf("wake: %w", err)
	}
	m.mu.Lock()
	m.wokeFrom = file
	m.mu.Unlock()
	return m, nil
}

var _ desktop.Committer = (*Machine)(nil)

// Committed runs a woken machine's guest and removes the state it woke
// from, now that the Manager's record names the running machine.
func (m *Machine) Committed(ctx context.Context) error {
	m.mu.Lock()
	path := m.wokeFrom
	m.wokeFrom = ""
	m.mu.Unlock()
	if path == "" {
		return nil
	}
	// Gone before the guest runs: a crash after this finds a paused
	// domain and no state, and resumes it.
	if err := qemuvm.RemoveWokenState(path); err != nil {
		return fmt.Errorf("wake: remove the state it woke from: %w", err)
	}
	if err := m.resume(ctx); err != nil {
		return fmt.Errorf("wake: start guest: %w", err)
	}
	return nil
}
