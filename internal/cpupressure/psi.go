// Package cpupressure measures how contended the host's CPUs are: the
// share of time in which runnable work waited for a CPU, over a recent
// window. It reads the kernel's pressure stall information
// (/proc/pressure/cpu, "some" line) where the kernel has it, and
// estimates from the load average where not.
package cpupressure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PSIFile is where Linux reports CPU pressure (since 4.20, with PSI on).
const PSIFile = "/proc/pressure/cpu"

// ParsePSI reads the cumulative time in which some task waited for a CPU
// (the "some" line's total, microseconds) from a pressure file.
func ParsePSI(data []byte) (time.Duration, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		for _, f := range fields[1:] {
			v, ok := strings.CutPrefix(f, "total=")
			if !ok {
				continue
			}
			us, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				return 0, fmt.Errorf("pressure file: some total=%q: %w", v, err)
			}
			if us > uint64(1<<63-1)/uint64(time.Microsecond) {
				return 0, fmt.Errorf("pressure file: some total=%s is out of range", v)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
		return 0, errors.New("pressure file: the some line has no total")
	}
	return 0, errors.New("pressure file: no some line")
}

// ParseLoadavg reads the one-minute load average from /proc/loadavg.
func ParseLoadavg(data []byte) (float64, error) {
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, errors.New("loadavg: empty")
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || load < 0 || load > 1e9 {
		return 0, fmt.Errorf("loadavg: one-minute load %q is not a load", fields[0])
	}
	return load, nil
}

// LoadShare estimates the share of runnable work that waits for a CPU
// from the load average: with load above the CPU count, the work beyond
// the CPUs waits ((load - cpus) / load); at or below it, none does.
func LoadShare(load float64, cpus int) float64 {
	if cpus < 1 || load <= float64(cpus) {
		return 0
	}
	return (load - float64(cpus)) / load
}
