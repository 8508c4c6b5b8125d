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

// Memory a machine's cgroup allows beyond its guest's RAM. Under TCG the
// translated-code cache alone may grow to 1 GiB (QEMU 7.2's default
// tb-size on 64-bit hosts); the rest is QEMU's heap, its threads' stacks,
// the qcow2 caches and the VNC server's buffers. docs/SECURITY.md has the
// figure measured on a working desktop.
const (
	tcgCodeCacheMiB = 1024
	qemuOwnMiB      = 512
)

// machinePidsMax bounds a QEMU's threads: a vCPU thread each, the main
// loop, RCU, the VNC worker, and the block layer's pool of up to 64.
const machinePidsMax = 512

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
		// Machines' own directories are theirs (0700, their user);
		// the roots above them only let QEMU through.
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
	// Start at a random place in the range, so two processes sharing
	// a range (tests run in parallel) rarely hand out the same ids.
	c := &confinement{ids: confine.NewIDs(r, rand.Uint32N(r.Count)), log: log}
	if !opts.NoCgroups {
		name := opts.CgroupParent
		if name == "" {
			name = "warmdesk"
		}
		var err error
		if c.cgroups, err = confine.Detect(name); err != nil {
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
	}
	return c, nil
}

// jail is one machine's share of the confinement.
type jail struct {
	owner *qemuvm.Owner  // nil: QEMU runs as hostd's user
	group *confine.Group // nil: no cgroup of its own
	limit int64          // the group's memory limit, for the exit reason
	ids   *confine.IDs   // where owner's id goes back to
	once  sync.Once
}

// jail makes rec's jail: an id (its files in rec's directories given to
// it) and a cgroup. On failure nothing is left taken.
func (c *confinement) jail(rec record) (*jail, error) {
	if c == nil {
		return &jail{}, nil
	}
	uid, err := c.ids.Take()
	if err != nil {
		return nil, fmt.Errorf("qemu driver: %w", err)
	}
	j := &jail{owner: &qemuvm.Owner{UID: uid, GID: uid}, ids: c.ids}
	if err := j.owner.Chown(ownedFiles(rec)...); err != nil {
		j.exit()
		return nil, fmt.Errorf("qemu driver: give the machine's files to its user: %w", err)
	}
	if c.cgroups != nil {
		j.limit = int64(rec.Shape.MemoryMiB+overheadMiB(rec.Shape.Accel)) << 20
		l := confine.Limits{MemoryBytes: j.limit, CPUWeight: 100 * max(1, rec.Shape.CPUs), PidsMax: machinePidsMax}
		if j.group, err = c.cgroups.Create(rec.ID, l); err != nil {
			j.exit()
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
	}
	return j, nil
}

// rejail finds the jail of a machine found again after a restart.
func (c *confinement) rejail(rec record) *jail {
	j := &jail{}
	if rec.UID != 0 {
		j.owner = &qemuvm.Owner{UID: rec.UID, GID: rec.UID}
		if c != nil && c.ids.Contains(rec.UID) {
			if err := c.ids.Hold(rec.UID); err != nil {
				c.log.Warn("a machine found again shares its user id", "machine", rec.ID, "err", err)
			} else {
				j.ids = c.ids
			}
		}
	}
	if len(rec.Cgroup) > 0 {
		j.group = confine.GroupAt(rec.Cgroup)
	}
	return j
}

// overheadMiB is what a machine's cgroup allows beyond its guest's RAM.
func overheadMiB(accel string) int {
	if accel == "kvm" {
		return qemuOwnMiB
	}
	return tcgCodeCacheMiB + qemuOwnMiB
}

// ownedFiles are the files a machine's user owns: its two directories and
// its top disk overlay when that lives in its data directory (a bake's
// disk is in the snapshot's draft and stays root's; QEMU opens it before
// it drops root).
func ownedFiles(rec record) []string {
	files := []string{rec.RunDir, rec.DataDir}
	if rec.Disk != "" && filepath.Dir(rec.Disk) == filepath.Clean(rec.DataDir) {
		files = append(files, rec.Disk)
	}
	return files
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
	ids, err := qemuvm.ProcessOwner(pid)
	if err != nil {
		return fmt.Errorf("qemu driver: check QEMU's user: %w", err)
	}
	for _, id := range ids {
		if id != j.owner.UID {
			return fmt.Errorf("qemu driver: QEMU runs as user ids %v, not as the machine's user %d", ids, j.owner.UID)
		}
	}
	return nil
}

// exit runs once the machine's QEMU has ended: it says whether the kernel
// killed it for reaching its memory limit, removes its cgroup and gives
// its id back.
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
			j.group.Remove()
		}
		if j.ids != nil && j.owner != nil {
			j.ids.Release(j.owner.UID)
		}
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
