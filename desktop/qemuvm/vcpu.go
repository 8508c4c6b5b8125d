package qemuvm

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// VCPUTime is how long the virtual CPUs of the QEMU process pid have run
// or waited for a host CPU to run on, summed. A guest with nothing to do
// halts its CPUs and QEMU's vCPU threads sleep (under TCG as under KVM),
// so this time advancing says the guest is busy: still acting on input it
// has taken. The wait counts because on a loaded host a busy guest's
// threads spend much of their time queued. QEMU names the
// threads "CPU n/TCG" or "CPU n/KVM" when started with debug-threads=on,
// which both drivers set; the scheduler keeps each thread's run time in
// nanoseconds in its schedstat.
func VCPUTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("vcpu time: no QEMU process id (%d)", pid)
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("vcpu time: no threads of process %d (has it ended?)", pid)
	}
	var total time.Duration
	vcpus := 0
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join(task, "comm"))
		if err != nil || !IsVCPUThread(string(comm)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(task, "schedstat"))
		if err != nil {
			continue // the thread ended between the listing and the read
		}
		ran, err := ParseSchedstat(string(stat))
		if err != nil {
			return 0, fmt.Errorf("vcpu time of %s: %w", task, err)
		}
		total += ran
		vcpus++
	}
	if vcpus == 0 {
		return 0, fmt.Errorf("vcpu time: process %d has no thread named CPU n/ACCEL (started without debug-threads=on?)", pid)
	}
	return total, nil
}

// IsVCPUThread says whether a thread name (its comm) is one of QEMU's
// virtual CPU threads: "CPU 0/TCG", "CPU 12/KVM".
func IsVCPUThread(comm string) bool {
	n, accel, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(comm, "CPU ")), "/")
	if !ok || !strings.HasPrefix(comm, "CPU ") || accel == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}

// ParseSchedstat reads a /proc schedstat line, "run wait slices" (the
// first two in nanoseconds), and returns run plus wait.
func ParseSchedstat(s string) (time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) != 3 {
		return 0, fmt.Errorf("schedstat %q: want three fields (run ns, wait ns, slices)", s)
	}
	var total time.Duration
	for _, f := range fields[:2] {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil || ns < 0 || time.Duration(ns) > math.MaxInt64-total {
			return 0, fmt.Errorf("schedstat %q: %q is not a count of nanoseconds", s, f)
		}
		total += time.Duration(ns)
	}
	return total, nil
}
