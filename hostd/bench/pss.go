package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// parsePSS reads the Pss line of /proc/PID/smaps_rollup, in kB.
func parsePSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "Pss:" && f[2] == "kB" {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("smaps_rollup: bad Pss %q", f[1])
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps_rollup: no Pss line")
}

// processPSS returns a process's proportional set size in bytes: its
// private memory plus its share of memory it maps with others (the
// template's memory file, shared libraries).
func processPSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	kb, err := parsePSS(f)
	return kb * 1024, err
}
