package qemuvm

import (
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
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

// MachineLimits are the limits of a machine's cgroup, the same under
// either driver: its guest's RAM plus QEMU's own (OverheadMiB), a CPU
// weight per virtual CPU, and its threads.
func MachineLimits(s desktop.MachineShape) confine.Limits {
	return confine.Limits{MemoryBytes: int64(s.MemoryMiB+OverheadMiB(s.Accel)) << 20, CPUWeight: CPUWeight(s.CPUs), PidsMax: machinePidsMax}
}

// OverheadMiB is what a machine's cgroup allows beyond its guest's RAM.
func OverheadMiB(accel string) int {
	if accel == "kvm" {
		return qemuOwnMiB
	}
	return tcgCodeCacheMiB + qemuOwnMiB
}

// CPUWeight is a desktop's share of contended CPU time: one CPU's default
// per virtual CPU.
func CPUWeight(cpus int) int { return 100 * max(1, cpus) }
