package libvirt

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// findPid finds the QEMU process of a domain by the -uuid libvirt gives it
// on its command line (libvirt's API does not report the pid). It returns
// 0 when there is none, or when libvirtd runs QEMU where hostd cannot see
// its processes.
func findPid(uuid string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte("\x00-uuid\x00" + uuid + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, want) {
			return pid
		}
	}
	return 0
}

// watchConsole reads the serial console socket line by line, for Boot
// machines whose readiness is reported there.
func (m *Machine) watchConsole(ctx context.Context, fn func(string)) error {
	return qemuvm.WatchConsole(ctx, m.record().Path("console.sock"), "", m.exited, fn) // virtlogd writes and rotates its log
}
