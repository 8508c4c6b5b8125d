package qemu

import (
	"slices"
	"testing"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

func TestUnownedPicksDesktopsTakenPoolMachinesAndOrphanTemplates(t *testing.T) {
	names := map[string]bool{
		"d-kept": true, "d-orphan": true, "pool-ready": true, "pool-taken": true, "pool-kept": true,
		"tmpl-baking": true, "tmpl-orphan": true, "bake-live": true, "bake-orphan": true, "other": true,
	}
	keep := map[string]bool{"d-kept": true, "pool-kept": true}
	marked := func(name string) bool { return name == "pool-ready" }
	draftLive := func(name string) bool { return name == "tmpl-baking" || name == "bake-live" }
	got := unowned(names, keep, marked, draftLive)
	slices.Sort(got)
	if want := []string{"bake-orphan", "d-orphan", "pool-taken", "tmpl-orphan"}; !slices.Equal(got, want) {
		t.Fatalf("unowned = %v, want %v", got, want)
	}
}

// A machine's user owns its top overlay, never its directories (hostd
// works in them as root) nor a disk outside its data directory (a bake's,
// in the snapshot's draft).
func TestOwnedDisk(t *testing.T) {
	clone := record{Dirs: qemuvm.Dirs{RunDir: "/run/w/d-1", DataDir: "/var/w/d-1"}, Disk: "/var/w/d-1/disk-1.qcow2"}
	if got := ownedDisk(clone); got != "/var/w/d-1/disk-1.qcow2" {
		t.Errorf("clone: %q", got)
	}
	bake := record{Dirs: qemuvm.Dirs{RunDir: "/run/w/bake-1", DataDir: "/var/w/bake-1"}, Disk: "/snap/.draft-x/disk.qcow2"}
	if got := ownedDisk(bake); got != "" {
		t.Errorf("bake: %q", got)
	}
}
