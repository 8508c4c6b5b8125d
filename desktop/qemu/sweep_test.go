package qemu

import (
	"slices"
	"testing"
)

func TestUnownedPicksDesktopsAndTakenPoolMachines(t *testing.T) {
	names := map[string]bool{"d-kept": true, "d-orphan": true, "pool-ready": true, "pool-taken": true, "pool-kept": true, "tmpl-baking": true, "other": true}
	keep := map[string]bool{"d-kept": true, "pool-kept": true}
	marked := func(name string) bool { return name == "pool-ready" }
	got := unowned(names, keep, marked)
	slices.Sort(got)
	if want := []string{"d-orphan", "pool-taken"}; !slices.Equal(got, want) {
		t.Fatalf("unowned = %v, want %v", got, want)
	}
}
