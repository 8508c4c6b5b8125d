package qemu

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

// confinement hands each machine's QEMU a user id of its own and a cgroup
// of its own. A nil *confinement confines nothing (hostd not root, or
// turned off).
type confinement struct {
	ids     *confine.IDs
	cgroups *confine.Cgroups // nil: no per-machine cgroups
	log     *slog.Logger
}

// newConfinement sets up what opts ask for. Confining needs root: hostd
// running as another user gets nil and a log line saying so.
func newConfinement(opts Options, log *slog.Logger) (*confinement, error) {
	if opts.Unconfined {
		log.Warn("QEMU runs as hostd's own user, in hostd's cgroup: confinement is off")
		return nil, nil
	}
	if os.Geteuid() != 0 {
		log.Warn("hostd is not root: QEMU runs as hostd's user, in hostd's cgroup")
		return nil, nil
	}
	for _, dir := range []string{opts.RunDir, opts.DataDir} {
		// The roots, like machines' own directories, only let QEMU
		// through to the files it owns.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
		if err := qemuvm.Traversable(dir); err != nil {
			return nil, fmt.Errorf("qemu driver: %w (or run with confinement off)", err)
		}
	}
	r := opts.UIDs
	if r.Count == 0 {
		r = confine.DefaultIDRange
	}
	leases := opts.UIDLeaseDir
	if leases == "" {
		leases = confine.DefaultLeaseDir
	}
	// Start at a random place in the range, so processes sharing it
	// (tests run in parallel) rarely try the same ids first.
	ids, err := confine.NewIDs(r, rand.Uint32N(r.Count), leases)
	if err != nil {
		return nil, fmt.Errorf("qemu driver: %w", err)
	}
	c := &confinement{ids: ids, log: log}
	if !opts.NoCgroups {
		name := opts.CgroupParent
		if name == "" {
			// One per run directory: two hostd on one machine (a fleet's
			// tests) may both run a desktop of one id, while it moves.
			name = "warmdesk-" + dirTag(opts.RunDir)
		}
		if c.cgroups, err = confine.Detect(name); err != nil {
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
	}
	return c, nil
}

// jail is one machine's share of the confinement.
type jail struct {
	owner *qemuvm.Owner  // nil: QEMU runs as hostd's user
	lease *confine.Lease // hostd's hold on owner's id; QEMU inherits it
	group *confine.Group // nil: no cgroup of its own
	limit int64          // the group's memory limit, for the exit reason
	log   *slog.Logger
	once  sync.Once

	mu   sync.Mutex
	disk string // the file the machine's user owns: its top overlay
}

// jail makes rec's jail: an id (its files in rec's directories given to
// it) and a cgroup. On failure nothing is left taken.
func (c *confinement) jail(rec record) (*jail, error) {
	if c == nil {
		return &jail{}, nil
	}
	lease, err := c.ids.Take()
	if err != nil {
		return nil, fmt.Errorf("qemu driver: %w", err)
	}
	j := &jail{owner: &qemuvm.Owner{UID: lease.ID, GID: lease.ID}, lease: lease, log: c.log}
	if err := j.own(rec); err != nil {
		j.exit()
		return nil, fmt.Errorf("qemu driver: give the machine's files to its user: %w", err)
	}
	if c.cgroups != nil {
		l := qemuvm.MachineLimits(rec.Shape)
		j.limit = l.MemoryBytes
		if j.group, err = c.cgroups.Create(rec.ID, l); err != nil {
			j.exit()
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
	}
	return j, nil
}

// backgroundCPUWeight is a pool machine's share while it is restored and
// warmed up: the least, so readying machines ahead never slows a desktop
// in use (a refill spawned while a new desktop answered its first client
// took CPU from it). A machine booted for a bake keeps an idle desktop's
// share instead: at this one, a bake beside four driven desktops had not
// booted its guest after 10 minutes (docs/BENCHMARKS.md, the busy suite).
const backgroundCPUWeight = 1

// setCPUWeight changes the machine's share of CPU time; without a cgroup
// of its own it has none to change.
func (j *jail) setCPUWeight(w int) error {
	if j == nil || j.group == nil {
		return nil
	}
	return j.group.SetCPUWeight(w)
}

// rejail finds the jail of a machine found again after a restart. Its
// QEMU holds the lease on its id (it inherited the locked descriptor);
// this hostd holds none, so the id is free the moment QEMU ends, before
// exit gives its disk back to root: a window of a few milliseconds that
// only machines found again after a restart have.
func (c *confinement) rejail(rec record) *jail {
	j := &jail{disk: ownedDisk(rec)}
	if c != nil {
		j.log = c.log
	}
	if rec.UID != 0 {
		j.owner = &qemuvm.Owner{UID: rec.UID, GID: rec.UID}
	}
	if len(rec.Cgroup) > 0 {
		j.group = confine.GroupAt(rec.Cgroup)
	}
	return j
}

// ownedDisk is the file a machine's user owns: its top disk overlay when
// that lives in its data directory ("" otherwise: a bake's disk is in the
// snapshot's draft and stays root's; QEMU opens it before it drops root).
// Its directories stay root's: hostd writes and reads files in them as
// root, so the machine's user must not be able to put a symbolic link or
// a FIFO in their place.
func ownedDisk(rec record) string {
	if rec.Disk != "" && filepath.Dir(rec.Disk) == filepath.Clean(rec.DataDir) {
		return rec.Disk
	}
	return ""
}

// own gives the machine's user its disk, readable and writable by it
// alone, and lets it through its directories (0711: it opens files there
// by name, a new overlay or a screendump, but cannot list, create or
// remove anything).
func (j *jail) own(rec record) error {
	for _, dir := range []string{rec.RunDir, rec.DataDir} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	disk := ownedDisk(rec)
	j.setDisk(disk)
	if disk == "" {
		return nil
	}
	return j.owner.Give(disk)
}

// setDisk names the file the machine's user owns now (a snapshot moves
// the machine to a new overlay).
func (j *jail) setDisk(path string) {
	j.mu.Lock()
	j.disk = path
	j.mu.Unlock()
}

// inherited are the descriptors QEMU inherits from the jail: the lease on
// its id, which QEMU then holds while it lives.
func (j *jail) inherited() []*os.File {
	if j.lease == nil {
		return nil
	}
	return []*os.File{j.lease.File()}
}

// stamp writes the jail into rec.
func (j *jail) stamp(rec *record) {
	rec.UID, rec.Cgroup = 0, nil
	if j.owner != nil {
		rec.UID = j.owner.UID
	}
	if j.group != nil {
		rec.Cgroup = j.group.Dirs()
	}
}

// enter puts process pid into the jail's cgroup.
func (j *jail) enter(pid int) error {
	if j.group == nil {
		return nil
	}
	return j.group.Add(pid)
}

// verify checks that QEMU has become the machine's user. QEMU drops root
// at the end of its start-up, before its main loop answers the first
// monitor command, so once the monitor has answered this holds.
func (j *jail) verify(pid int) error {
	if j.owner == nil {
		return nil
	}
	if err := qemuvm.CheckRunsAs(pid, *j.owner); err != nil {
		return fmt.Errorf("qemu driver: %w", err)
	}
	return nil
}

// exit runs once the machine's QEMU has ended: it says whether the kernel
// killed it for reaching its memory limit, removes its cgroup, gives its
// disk back to root, and only then lets go of its id, so no machine given
// the id next can open what this one left.
func (j *jail) exit() string {
	var note string
	j.once.Do(func() {
		if j.group != nil {
			if n := j.group.OOMKills(); n > 0 {
				note = fmt.Sprintf("reached its memory limit of %d MiB (guest RAM plus QEMU's own) and the kernel's OOM killer ended it", j.limit>>20)
				if j.limit == 0 {
					note = "reached its cgroup's memory limit and the kernel's OOM killer ended it"
				}
			}
			if err := j.group.Remove(); err != nil && j.log != nil {
				j.log.Warn("a machine's cgroup stays", "err", err)
			}
		}
		j.mu.Lock()
		disk := j.disk
		j.mu.Unlock()
		if j.owner != nil && disk != "" {
			if err := qemuvm.Root.Chown(disk); err != nil && !os.IsNotExist(err) {
				if j.log != nil {
					j.log.Error("an ended machine's disk keeps its user; its id stays held", "disk", disk, "err", err)
				}
				return // better an id lost than handed out with a file
			}
		}
		j.lease.Release()
	})
	return note
}

// describe is the jail for logs.
func (j *jail) describe() string {
	var parts []string
	if j.owner != nil {
		parts = append(parts, fmt.Sprintf("uid %d", j.owner.UID))
	}
	if j.group != nil {
		parts = append(parts, "cgroup "+j.group.MemoryDir())
	}
	if len(parts) == 0 {
		return "unconfined"
	}
	return strings.Join(parts, ", ")
}
