package qemuvm

import (
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

func TestMachineLimits(t *testing.T) {
	tcg := MachineLimits(desktop.MachineShape{MemoryMiB: 1024, CPUs: 2, Accel: "tcg"})
	if tcg.MemoryBytes != (1024+1536)<<20 || tcg.CPUWeight != 200 || tcg.PidsMax != 512 {
		t.Errorf("tcg: %+v", tcg)
	}
	if kvm := MachineLimits(desktop.MachineShape{MemoryMiB: 2048, Accel: "kvm"}); kvm.MemoryBytes != (2048+512)<<20 || kvm.CPUWeight != 100 {
		t.Errorf("kvm: %+v", kvm)
	}
}
