package libvirt

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Each desktop's QEMU gets a cgroup of its own, made by hostd with the
// limits the QEMU driver sets (qemuvm.MachineLimits), when libvirtd left
// it in libvirtd's own cgroup: libvirt's own per-domain cgroups are off in
// the test configuration (scripts/libvirtd), and turning them on here fails
// ("v2 controller '(null)' is not available": these machines list an
// empty cgroup v2 hierarchy beside the v1 ones). A QEMU that libvirt did
// place in a cgroup of its own (a host's configuration with
// cgroup_controllers on) is left there: libvirt manages it.

// cgroupName is the parent hostd makes desktops' cgroups in, as the QEMU
// driver's default.
const cgroupName = "warmdesk"

// newCgroups finds where desktops' cgroups go: nil (with a log line) when
// hostd cannot make them.
func (d *Driver) newCgroups() *confine.Cgroups {
	if d.opts.NoCgroups {
		return nil
	}
	if os.Geteuid() != 0 {
		d.log.Warn("hostd is not root: desktops' QEMU processes stay in libvirtd's cgroup")
		return nil
	}
	c, err := confine.Detect(cgroupName)
	if err != nil {
		d.log.Warn("no cgroups for desktops: their QEMU processes stay in libvirtd's cgroup", "err", err)
		return nil
	}
	return c
}

// confineDesktop moves a desktop's QEMU into a cgroup of its own and returns its
// directories, or nil when it stays where it is (no cgroups here, or
// libvirt placed it in one of its own).
func (d *Driver) confineDesktop(rec record, pid int) ([]string, error) {
	if d.cgroups == nil || pid == 0 {
		return nil, nil
	}
	if placed, err := libvirtPlaced(pid); err != nil || placed {
		return nil, err
	}
	g, err := d.cgroups.Create(rec.ID, qemuvm.MachineLimits(rec.Shape))
	if err != nil {
		return nil, fmt.Errorf("cgroup of %s: %w", rec.ID, err)
	}
	if err := g.Add(pid); err != nil {
		g.Remove()
		return nil, fmt.Errorf("cgroup of %s: move QEMU (pid %d) into it: %w", rec.ID, pid, err)
	}
	return g.Dirs(), nil
}

// libvirtPlaced says whether libvirt put process pid in a cgroup of the
// domain's own.
func libvirtPlaced(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false, fmt.Errorf("cgroups of QEMU (pid %d): %w", pid, err)
	}
	return placedByLibvirt(string(b))
}

// placedByLibvirt reads a /proc/PID/cgroup: on every cgroup layout
// libvirt uses, a domain's own cgroup's path ends in ".libvirt-qemu" or,
// under systemd, is a "machine-qemu...scope".
func placedByLibvirt(procCgroup string) (bool, error) {
	v1, v2, err := confine.ParseProcCgroup(procCgroup)
	if err != nil {
		return false, err
	}
	for _, p := range append(slices.Collect(maps.Values(v1)), v2) {
		if strings.Contains(p, ".libvirt-qemu") || strings.Contains(p, "machine-qemu") {
			return true, nil
		}
	}
	return false, nil
}

// cgroupExit says, for an ended desktop's exit reason, whether the kernel
// killed its QEMU at its cgroup's memory limit, and removes the cgroup in
// the background (the process may take a moment to be reaped, and the
// caller is libvirt's event loop).
func (d *Driver) cgroupExit(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	g := confine.GroupAt(dirs)
	var note string
	if g.OOMKills() > 0 {
		note = "reached its cgroup's memory limit (guest RAM plus QEMU's own) and the kernel's OOM killer ended it"
	}
	go func() {
		if err := g.Remove(); err != nil {
			d.log.Warn("an ended desktop's cgroup stays", "err", err)
		}
	}()
	return note
}
