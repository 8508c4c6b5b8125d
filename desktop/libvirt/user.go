package libvirt

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// A desktop's QEMU runs as a user id of its own, as under the QEMU driver:
// it starts as libvirt's user (root), opens the snapshot's memory file and
// its disk and binds its sockets, then drops to the id with -runas. QEMU
// 7.2 opens the memory file read-write even for its private mapping, so
// the file stays root's and only the descriptor QEMU opened as root reaches
// it. libvirt's own user switch (a static DAC seclabel) would come before
// QEMU starts, and so would need the file writable by the id.
//
// libvirtd starts QEMU, so QEMU cannot inherit the lease on its id, as it
// does under the QEMU driver: hostd holds it while the domain lives, and
// takes it again by id when it finds the domain after a restart. While
// hostd is down nobody holds it, which is why this driver's ids come from
// a range of their own (DefaultUIDs): the QEMU driver's machines never
// meet them.

// DefaultUIDs is the range of the libvirt driver's desktops' ids: the
// block after the QEMU driver's (confine.DefaultIDRange).
var DefaultUIDs = confine.IDRange{First: confine.DefaultIDRange.First + confine.DefaultIDRange.Count, Count: 65_536}

// newIDs sets up the ids of opts: nil (with a log line) when QEMU runs as
// libvirt's user.
func (d *Driver) newIDs() (*confine.IDs, error) {
	if d.opts.Unconfined {
		d.log.Warn("desktops' QEMU runs as libvirt's qemu.conf user: confinement is off")
		return nil, nil
	}
	if os.Geteuid() != 0 {
		d.log.Warn("hostd is not root: desktops' QEMU runs as libvirt's qemu.conf user")
		return nil, nil
	}
	for _, dir := range []string{d.opts.RunDir, d.opts.DataDir} {
		// The roots, like machines' own directories, only let QEMU
		// through to the files it owns.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, fmt.Errorf("libvirt driver: %w", err)
		}
		if err := qemuvm.Traversable(dir); err != nil {
			return nil, fmt.Errorf("libvirt driver: %w (or run with --qemu-uids off)", err)
		}
	}
	r := d.opts.UIDs
	if r.Count == 0 {
		r = DefaultUIDs
	}
	leases := d.opts.UIDLeaseDir
	if leases == "" {
		leases = confine.DefaultLeaseDir
	}
	ids, err := confine.NewIDs(r, rand.Uint32N(r.Count), leases)
	if err != nil {
		return nil, fmt.Errorf("libvirt driver: %w", err)
	}
	return ids, nil
}

// machineUser is a desktop's id while its domain lives.
type machineUser struct {
	owner qemuvm.Owner
	lease *confine.Lease // nil for a domain found again whose id another process holds
	log   *slog.Logger
	once  sync.Once

	mu       sync.Mutex // guards disk and released, and lease's release
	disk     string     // the file the id owns: the top disk overlay
	released bool       // the domain ended and the disk went back to root
}

// newUser takes an id for rec's desktop and gives it its disk: readable
// and writable by it alone. Its directories are let through (0711): QEMU
// opens files there by name (a new overlay, a screendump) but cannot list,
// create or remove anything, so hostd, which reads and writes there as
// root, never meets a link or a FIFO the id put in place of a file.
func (d *Driver) newUser(rec record) (*machineUser, error) {
	lease, err := d.ids.Take()
	if err != nil {
		return nil, fmt.Errorf("libvirt driver: %w", err)
	}
	u := &machineUser{owner: qemuvm.Owner{UID: lease.ID, GID: lease.ID}, lease: lease, log: d.log}
	for _, dir := range []string{rec.RunDir, rec.DataDir} {
		if err := os.Chmod(dir, 0o711); err != nil {
			u.release()
			return nil, fmt.Errorf("libvirt driver: %w", err)
		}
	}
	if disk := ownedDisk(rec); disk != "" {
		if err := u.owner.Give(disk); err != nil {
			u.release()
			return nil, fmt.Errorf("libvirt driver: give the desktop's disk to its user: %w", err)
		}
		u.disk = disk
	}
	return u, nil
}

// userAgain is the user of a desktop's domain found after a restart of
// hostd: its lease taken again. Held elsewhere (only possible if another
// process handed the id out while no hostd held it), the domain keeps
// running and the conflict is logged.
func (d *Driver) userAgain(rec record) *machineUser {
	if rec.UID == 0 {
		return nil
	}
	u := &machineUser{owner: qemuvm.Owner{UID: rec.UID, GID: rec.UID}, disk: ownedDisk(rec), log: d.log}
	if d.ids == nil {
		return u
	}
	lease, err := d.ids.Hold(rec.UID)
	if err != nil {
		d.log.Error("a desktop found running: its user id is not held by this hostd", "machine", rec.ID, "uid", rec.UID, "err", err)
		return u
	}
	u.lease = lease
	return u
}

// ownedDisk is the file a desktop's id owns: its top overlay in its data
// directory.
func ownedDisk(rec record) string {
	if rec.Disk != "" && filepath.Dir(rec.Disk) == filepath.Clean(rec.DataDir) {
		return rec.Disk
	}
	return ""
}

// ownerOf is who QEMU runs as: the user's id, or root without one.
func (u *machineUser) ownerOf() qemuvm.Owner {
	if u == nil {
		return qemuvm.Root
	}
	return u.owner
}

// own gives path to the id as the disk it owns now (a snapshot moving
// the desktop to a new overlay, or back when that failed). Once the
// domain has ended it does nothing: the id may be another desktop's by
// then.
func (u *machineUser) own(path string) error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.released {
		return nil
	}
	if err := u.owner.Give(path); err != nil {
		return err
	}
	u.disk = path
	return nil
}

// verify checks that QEMU has become the desktop's user. QEMU drops root at
// the end of its start, before libvirt's domain creation returns.
func (u *machineUser) verify(pid int) error {
	if u == nil {
		return nil
	}
	if err := qemuvm.CheckRunsAs(pid, u.owner); err != nil {
		return fmt.Errorf("libvirt driver: %w", err)
	}
	return nil
}

// letGo lets go of the lease while the domain runs on: hostd is closing
// its driver, and the next one takes the lease again (userAgain).
func (u *machineUser) letGo() {
	if u != nil {
		u.mu.Lock()
		u.lease.Release()
		u.mu.Unlock()
	}
}

// release runs once the domain has ended: it gives the disk back to root
// and only then lets go of the id, so no desktop given the id next can
// open what this one left.
func (u *machineUser) release() {
	if u == nil {
		return
	}
	u.once.Do(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.released = true
		if u.disk != "" {
			if err := qemuvm.Root.Chown(u.disk); err != nil {
				u.log.Error("an ended desktop's disk keeps its user; its id stays held", "disk", u.disk, "err", err)
				return // better an id lost than handed out with a file
			}
		}
		u.lease.Release()
	})
}

// sandboxHint says why a confined desktop's QEMU died at its start when
// libvirt's own seccomp sandbox (qemu.conf seccomp_sandbox, on by
// default) is the cause: it comes after hostd's on the command line the
// domain's log shows, and denies the switch to the desktop's id.
func (d *Driver) sandboxHint(u *machineUser, logPath string) string {
	if u == nil || !libvirtSandboxDenies(qemuvm.LogTail(logPath, 200)) {
		return ""
	}
	return "; libvirt adds its own seccomp sandbox (qemu.conf seccomp_sandbox), which forbids QEMU's switch to the desktop's user id: set seccomp_sandbox = 0 in libvirt's qemu.conf (hostd adds a sandbox of its own) and restart libvirtd, or run hostd with --qemu-uids off"
}

// libvirtSandboxDenies says whether the last QEMU command line in a domain
// log asks, after hostd's sandbox, for one that denies set*id calls.
func libvirtSandboxDenies(log string) bool {
	i := strings.LastIndex(log, "-runas ")
	return i >= 0 && strings.Contains(log[i:], "elevateprivileges=deny")
}
