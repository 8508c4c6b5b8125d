package qemu

import (
	"slices"
	"strings"
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

// A machine's user owns its two directories and its top overlay, never a
// disk outside its data directory (a bake's, in the snapshot's draft).
func TestOwnedFiles(t *testing.T) {
	clone := record{Dirs: qemuvm.Dirs{RunDir: "/run/w/d-1", DataDir: "/var/w/d-1"}, Disk: "/var/w/d-1/disk-1.qcow2"}
	if got := strings.Join(ownedFiles(clone), " "); got != "/run/w/d-1 /var/w/d-1 /var/w/d-1/disk-1.qcow2" {
		t.Errorf("clone: %s", got)
	}
	bake := record{Dirs: qemuvm.Dirs{RunDir: "/run/w/bake-1", DataDir: "/var/w/bake-1"}, Disk: "/snap/.draft-x/disk.qcow2"}
	if got := strings.Join(ownedFiles(bake), " "); got != "/run/w/bake-1 /var/w/bake-1" {
		t.Errorf("bake: %s", got)
	}
	if overheadMiB("tcg") != 1536 || overheadMiB("kvm") != 512 {
		t.Errorf("overheads %d (tcg), %d (kvm)", overheadMiB("tcg"), overheadMiB("kvm"))
	}
}
