package confine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits are what one machine's cgroup allows.
type Limits struct {
	// MemoryBytes bounds the machine's memory: its guest's RAM (the pages
	// it has written; pages still shared with a snapshot are charged to
	// whoever read them first) plus the emulator's own.
	MemoryBytes int64
	// CPUWeight is the machine's share of contended CPU time, on cgroup
	// v2's scale (1-10000, 100 is a default process's share).
	CPUWeight int
	// PidsMax bounds the emulator's threads.
	PidsMax int
}

// The controllers every machine's cgroup has.
var controllers = []string{"memory", "cpu", "pids"}

// Cgroups makes one cgroup per machine under a parent of hostd's own: on
// cgroup v1, a child of hostd's cgroup in each of the memory, cpu and pids
// hierarchies; on v2, a child of hostd's cgroup, hostd itself having
// moved into a leaf beside it (v2 lets only leaves hold processes once
// the controllers are on). hostd is never in a machine's cgroup.
type Cgroups struct {
	v2 bool
	// parents are the directories machines' cgroups are made in: one per
	// controller on v1 (in the order of controllers), one on v2.
	parents []string
}

// Detect finds this process's cgroups and makes the parent called name
// for machines' cgroups under them.
func Detect(name string) (*Cgroups, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	c, err := Locate(string(self), string(mounts), name)
	if err != nil {
		return nil, err
	}
	if err := c.makeParents(); err != nil {
		return nil, err
	}
	return c, nil
}

// Locate works out, from /proc/self/cgroup and /proc/self/mountinfo, where
// machines' cgroups go. It touches nothing.
func Locate(procCgroup, mountinfo, name string) (*Cgroups, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	own, v2Path, err := ParseProcCgroup(procCgroup)
	if err != nil {
		return nil, err
	}
	v1Mounts, v2Mount, err := ParseCgroupMounts(mountinfo)
	if err != nil {
		return nil, err
	}
	c := &Cgroups{}
	missing := []string{}
	for _, ctl := range controllers {
		mnt, okMount := v1Mounts[ctl]
		p, okPath := own[ctl]
		if !okMount || !okPath {
			missing = append(missing, ctl)
			continue
		}
		c.parents = append(c.parents, filepath.Join(mnt, p, name))
	}
	if len(missing) == 0 {
		return c, nil
	}
	if len(missing) == len(controllers) && v2Mount != "" && v2Path != "" {
		return &Cgroups{v2: true, parents: []string{filepath.Join(v2Mount, v2Path, name)}}, nil
	}
	return nil, fmt.Errorf("cgroups: no writable %s hierarchy is mounted (neither cgroup v2 nor v1 with all of %s): mount them, or run hostd with --no-cgroups", strings.Join(missing, ", "), strings.Join(controllers, ", "))
}

// ParseProcCgroup reads /proc/PID/cgroup: the v1 path per controller, and
// the v2 path (the "0::" line) if there is one.
func ParseProcCgroup(s string) (v1 map[string]string, v2 string, err error) {
	v1 = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return nil, "", fmt.Errorf("cgroups: unreadable /proc/self/cgroup line %q", line)
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			v1[ctl] = parts[2]
		}
	}
	return v1, v2, nil
}

// ParseCgroupMounts reads /proc/self/mountinfo for the read-write v1
// hierarchies (by controller) and the cgroup2 mount.
func ParseCgroupMounts(s string) (v1 map[string]string, v2 string, err error) {
	v1 = map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			continue
		}
		mnt, opts := unescapeMount(f[4]), f[5]
		if !hasOption(opts, "rw") || f[3] != "/" {
			continue // read-only, or a bind of a sub-hierarchy
		}
		switch g[0] {
		case "cgroup2":
			v2 = mnt
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "memory" || o == "cpu" || o == "pids" {
					v1[o] = mnt
				}
			}
		}
	}
	return v1, v2, nil
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") || path.Clean(name) != name {
		return fmt.Errorf("cgroups: %q is not a cgroup name: use letters, digits, '-' and '.'", name)
	}
	return nil
}

// V2 says whether these are cgroup v2 groups.
func (c *Cgroups) V2() bool { return c.v2 }

// Parents are the directories machines' cgroups are made in.
func (c *Cgroups) Parents() []string { return append([]string(nil), c.parents...) }

// makeParents makes the parent directories. On v2 it also moves hostd
// into a leaf of its own cgroup and turns the controllers on below it.
func (c *Cgroups) makeParents() error {
	for _, p := range c.parents {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("cgroups: %w", err)
		}
	}
	if !c.v2 {
		return nil
	}
	parent := c.parents[0]
	own := filepath.Dir(parent)
	leaf := filepath.Join(own, "hostd")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	if err := write(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		return err
	}
	for _, dir := range []string{own, parent} {
		if err := write(dir, "cgroup.subtree_control", "+memory +cpu +pids"); err != nil {
			return fmt.Errorf("%w (cgroup v2 lets controllers on only below a cgroup without processes: run hostd as a service of its own, with systemd's Delegate=yes, or with --no-cgroups)", err)
		}
	}
	return nil
}

// Group is one machine's cgroup.
type Group struct {
	v2   bool
	dirs []string // one per controller on v1, in the order of controllers
}

// Group names machine id's cgroup (made or not).
func (c *Cgroups) Group(id string) (*Group, error) {
	if err := checkName(id); err != nil {
		return nil, err
	}
	g := &Group{v2: c.v2}
	for _, p := range c.parents {
		g.dirs = append(g.dirs, filepath.Join(p, id))
	}
	return g, nil
}

// Create makes machine id's cgroup with limits l. On failure nothing is
// left.
func (c *Cgroups) Create(id string, l Limits) (*Group, error) {
	g, err := c.Group(id)
	if err != nil {
		return nil, err
	}
	for _, d := range g.dirs {
		err := os.Mkdir(d, 0o755)
		if errors.Is(err, os.ErrExist) {
			// Left by a machine that ended while no hostd watched: empty,
			// it goes; with processes in it, rmdir refuses.
			if err = rmdirWhenEmpty(d); err == nil {
				err = os.Mkdir(d, 0o755)
			}
		}
		if err != nil {
			g.Remove()
			return nil, fmt.Errorf("cgroups: %w", err)
		}
	}
	if err := g.setLimits(l); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// setLimits writes l into the group's files.
func (g *Group) setLimits(l Limits) error {
	type setting struct{ dir, file, value string }
	var s []setting
	if g.v2 {
		d := g.dirs[0]
		s = []setting{
			{d, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)},
			{d, "cpu.weight", strconv.Itoa(l.CPUWeight)},
			{d, "pids.max", strconv.Itoa(l.PidsMax)},
		}
	} else {
		s = []setting{
			{g.dirs[0], "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)},
			{g.dirs[1], "cpu.shares", strconv.Itoa(SharesOfWeight(l.CPUWeight))},
			{g.dirs[2], "pids.max", strconv.Itoa(l.PidsMax)},
		}
	}
	for _, x := range s {
		if err := write(x.dir, x.file, x.value); err != nil {
			return err
		}
	}
	return nil
}

// SetCPUWeight changes the group's share of contended CPU time (v2 weight,
// 1 to 10000; shares on v1).
func (g *Group) SetCPUWeight(w int) error {
	if g.v2 {
		return write(g.dirs[0], "cpu.weight", strconv.Itoa(w))
	}
	return write(g.dirs[1], "cpu.shares", strconv.Itoa(SharesOfWeight(w)))
}

// SharesOfWeight converts a v2 CPU weight (default 100) to v1 shares
// (default 1024), the conversion the kernel's and systemd's docs give.
func SharesOfWeight(w int) int {
	s := w * 1024 / 100
	return max(2, min(s, 262144))
}

// Add moves process pid, all its threads, into the group.
func (g *Group) Add(pid int) error {
	for _, d := range g.dirs {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Dirs are the group's directories (one per hierarchy on v1).
func (g *Group) Dirs() []string { return append([]string(nil), g.dirs...) }

// MemoryDir is the directory holding the group's memory files.
func (g *Group) MemoryDir() string { return g.dirs[0] }

// OOMKills counts the processes the kernel killed in this group because it
// reached its memory limit.
func (g *Group) OOMKills() int {
	file := "memory.oom_control"
	if g.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(g.dirs[0], file))
	if err != nil {
		return 0
	}
	return oomKills(string(data))
}

// oomKills reads the "oom_kill N" line of memory.oom_control (v1) or
// memory.events (v2).
func oomKills(s string) int {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// removeWait bounds how long Remove waits for an exited process to leave
// the group (a zombie not yet reaped still counts as a member).
const removeWait = 2 * time.Second

// Remove deletes the group. A group is removable once its processes have
// exited and been reaped, which for a process hostd is not the parent of
// can lag its exit a little: Remove retries while the kernel says busy,
// up to removeWait.
func (g *Group) Remove() error {
	var errs []error
	for _, d := range g.dirs {
		if err := rmdirWhenEmpty(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func rmdirWhenEmpty(dir string) error {
	deadline := time.Now().Add(removeWait)
	wait := time.Millisecond
	for {
		err := syscall.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			return nil
		case !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline):
			return fmt.Errorf("cgroups: remove %s: %w", dir, err)
		}
		time.Sleep(wait) // the kernel offers no event for "group now empty" on v1
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Contains says whether process pid is in the group.
func (g *Group) Contains(pid int) bool {
	data, err := os.ReadFile(filepath.Join(g.dirs[0], "cgroup.procs"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if sc.Text() == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroups: set %s in %s: %w", file, dir, err)
	}
	return nil
}

// GroupAt is a group already made, by the directories Dirs gave (after a
// restart, from a machine's record): one directory is a v2 group, three
// are v1's memory, cpu and pids.
func GroupAt(dirs []string) *Group {
	return &Group{v2: len(dirs) == 1, dirs: append([]string(nil), dirs...)}
}
