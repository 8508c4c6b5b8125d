package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseIDRange(t *testing.T) {
	good := map[string]IDRange{
		"900000000-900065535": DefaultIDRange,
		" 70000-70009 ":       {First: 70000, Count: 10},
		"100-100":             {First: 100, Count: 1},
	}
	for in, want := range good {
		got, err := ParseIDRange(in)
		if err != nil || got != want {
			t.Errorf("ParseIDRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                      "FIRST-LAST",
		"5000":                  "FIRST-LAST",
		"0-10":                  "root",
		"20-10":                 "below the first",
		"a-b":                   "decimal",
		"60000-70000":           "65534",
		"4000000000-4294967295": "no id",
	}
	for in, want := range bad {
		if _, err := ParseIDRange(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIDRange(%q) = %v, want an error saying %q", in, err, want)
		}
	}
	if s := DefaultIDRange.String(); s != "900000000-900065535" {
		t.Errorf("String = %q", s)
	}
}

func TestIDsLeases(t *testing.T) {
	dir := t.TempDir()
	a, err := NewIDs(IDRange{First: 70000, Count: 3}, 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Another allocator on the same directory stands for another process
	// (flock locks belong to open files, so it conflicts as one would).
	other, err := NewIDs(IDRange{First: 70000, Count: 3}, 1, dir)
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Take()
	if err != nil || held.ID != 70001 {
		t.Fatalf("other Take = %v, %v; want 70001", held, err)
	}
	first, err := a.Take()
	if err != nil || first.ID != 70000 {
		t.Fatalf("Take = %v, %v; want 70000", first, err)
	}
	second, err := a.Take()
	if err != nil || second.ID != 70002 {
		t.Fatalf("Take = %v, %v; want 70002 (70001 is held elsewhere)", second, err)
	}
	if _, err := a.Take(); !errors.Is(err, ErrNoIDs) {
		t.Fatalf("Take on a full range = %v, want ErrNoIDs", err)
	}
	first.Release()
	second.Release()
	// Ids come back in turn, not lowest first.
	if l, _ := a.Take(); l == nil || l.ID != 70000 {
		t.Fatalf("Take after release = %v, want 70000 (next in turn after 70002)", l)
	}
	held.Release()
	if l, _ := a.Take(); l == nil || l.ID != 70001 {
		t.Fatalf("Take = %v, want 70001 once the other let go", l)
	}
	if l, _ := func() (*Lease, error) { n, _ := NewIDs(IDRange{First: 10, Count: 5}, 7, t.TempDir()); return n.Take() }(); l == nil || l.ID != 12 {
		t.Fatalf("Take from start offset 7 of 5 ids = %v, want 12", l)
	}
}

// Hold takes one id's lease again, and only while nobody else holds it.
func TestIDsHold(t *testing.T) {
	dir := t.TempDir()
	a, err := NewIDs(IDRange{First: 70000, Count: 3}, 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewIDs(IDRange{First: 70000, Count: 3}, 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Hold(70002)
	if err != nil || held.ID != 70002 {
		t.Fatalf("Hold(70002) = %v, %v", held, err)
	}
	if _, err := a.Hold(70002); !errors.Is(err, ErrIDHeld) {
		t.Fatalf("Hold of an id held elsewhere = %v, want ErrIDHeld", err)
	}
	if _, err := a.Hold(69999); err == nil {
		t.Fatal("Hold of an id outside the range succeeded")
	}
	// Take skips an id held by Hold.
	for _, want := range []uint32{70000, 70001} {
		if l, err := a.Take(); err != nil || l.ID != want {
			t.Fatalf("Take = %v, %v; want %d", l, err, want)
		}
	}
	held.Release()
	if l, err := a.Hold(70002); err != nil || l.ID != 70002 {
		t.Fatalf("Hold once released = %v, %v", l, err)
	}
}

// The /proc/self/cgroup and mountinfo of a host with only cgroup v1, and
// of one with only v2.
const (
	v1Self = `9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu,cpuacct:/svc
0::/
`
	v1Mounts = `26 25 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
27 26 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
28 26 0:25 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
29 26 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
`
	v2Self   = "0::/system.slice/hostd.service\n"
	v2Mounts = "30 25 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
)

func TestLocate(t *testing.T) {
	c, err := Locate(v1Self, v1Mounts, "warmdesk")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/sys/fs/cgroup/memory/process_api/abc/warmdesk", "/sys/fs/cgroup/cpu,cpuacct/svc/warmdesk", "/sys/fs/cgroup/pids/warmdesk"}
	if c.V2() || strings.Join(c.Parents(), " ") != strings.Join(want, " ") {
		t.Fatalf("v1: v2=%v parents %v, want %v", c.V2(), c.Parents(), want)
	}
	c, err = Locate(v2Self, v2Mounts, "warmdesk")
	if err != nil {
		t.Fatal(err)
	}
	if !c.V2() || c.Parents()[0] != "/sys/fs/cgroup/system.slice/hostd.service/warmdesk" {
		t.Fatalf("v2: v2=%v parents %v", c.V2(), c.Parents())
	}
	// A v1 host missing the pids hierarchy has no usable cgroups.
	noPids := strings.Replace(v1Mounts, "rw,pids", "rw,freezer", 1)
	if _, err := Locate(v1Self, noPids, "warmdesk"); err == nil || !strings.Contains(err.Error(), "pids") {
		t.Fatalf("no pids hierarchy: %v, want an error naming pids", err)
	}
	// A read-only mount does not count.
	ro := strings.Replace(v1Mounts, "/sys/fs/cgroup/memory rw,", "/sys/fs/cgroup/memory ro,", 1)
	if _, err := Locate(v1Self, ro, "warmdesk"); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("read-only memory hierarchy: %v, want an error naming memory", err)
	}
	for _, name := range []string{"", "..", "a/b", "./x"} {
		if _, err := Locate(v1Self, v1Mounts, name); err == nil {
			t.Errorf("parent name %q accepted", name)
		}
	}
}

func TestOOMKillsAndShares(t *testing.T) {
	if n := oomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"); n != 3 {
		t.Errorf("v1 oom_kill = %d, want 3", n)
	}
	if n := oomKills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"); n != 1 {
		t.Errorf("v2 oom_kill = %d, want 1", n)
	}
	for w, want := range map[int]int{100: 1024, 200: 2048, 1: 10, 0: 2, 100000: 262144} {
		if got := SharesOfWeight(w); got != want {
			t.Errorf("SharesOfWeight(%d) = %d, want %d", w, got, want)
		}
	}
}

// A v2 group on a directory standing in for cgroupfs: the files it writes
// and the values in them.
func TestGroupV2Files(t *testing.T) {
	parent := t.TempDir()
	c := &Cgroups{v2: true, parents: []string{parent}}
	g, err := c.Create("d-1", Limits{MemoryBytes: 3 << 30, CPUWeight: 200, PidsMax: 512})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory.max": "3221225472", "cpu.weight": "200", "pids.max": "512"} {
		got, err := os.ReadFile(filepath.Join(parent, "d-1", file))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", file, got, err, want)
		}
	}
	// A pool machine's share, lowered and given back.
	for _, w := range []string{"1", "200"} {
		n, _ := strconv.Atoi(w)
		if err := g.SetCPUWeight(n); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(parent, "d-1", "cpu.weight")); string(got) != w {
			t.Errorf("cpu.weight after SetCPUWeight(%s) = %q", w, got)
		}
	}
	if err := g.Add(4242); err != nil {
		t.Fatal(err)
	}
	if !g.Contains(4242) || g.Contains(42) {
		t.Error("Contains does not read cgroup.procs")
	}
	if _, err := c.Create("../x", Limits{}); err == nil {
		t.Error("a group name with a path in it was accepted")
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add(v1Self)
	f.Add(v2Self)
	f.Fuzz(func(t *testing.T, s string) {
		v1, _, err := ParseProcCgroup(s)
		if err == nil {
			for ctl, p := range v1 {
				if !strings.HasPrefix(p, "/") {
					t.Fatalf("controller %q has path %q", ctl, p)
				}
			}
		}
	})
}

func FuzzParseCgroupMounts(f *testing.F) {
	f.Add(v1Mounts)
	f.Add(v2Mounts)
	f.Add(`31 25 0:28 / /mnt/with\040space rw - cgroup cgroup rw,memory`)
	f.Fuzz(func(t *testing.T, s string) {
		ParseCgroupMounts(s)
	})
}

func FuzzParseIDRange(f *testing.F) {
	f.Add("900000000-900065535")
	f.Add("1-2")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseIDRange(s)
		if err != nil {
			return
		}
		back, err := ParseIDRange(r.String())
		if err != nil || back != r {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, r, r.String(), back, err)
		}
		if r.Count == 0 || r.First == 0 {
			t.Fatalf("%q: range %v is empty or holds root", s, r)
		}
	})
}
