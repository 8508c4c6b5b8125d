package libvirt

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// logTail returns the last n lines of a log file, for error messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 16 << 10
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(info.Size()-window, 0)
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runTool runs a host tool and returns its combined output on failure.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// watchConsole reads the serial console socket line by line, for Boot
// machines whose readiness is reported there.
func (m *Machine) watchConsole(ctx context.Context, fn func(string)) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", m.record().path("console.sock"))
	if err != nil {
		return err
	}
	go func() {
		defer conn.Close()
		go func() {
			select {
			case <-m.exited:
			case <-ctx.Done():
			}
			conn.Close()
		}()
		buf := make([]byte, 0, 4096)
		chunk := make([]byte, 4096)
		for {
			n, err := conn.Read(chunk)
			buf = append(buf, chunk[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				fn(strings.TrimRight(string(buf[:i]), "\r"))
				buf = buf[i+1:]
			}
			if len(buf) > 4096 { // an endless line: hand it over in pieces
				fn(string(buf))
				buf = buf[:0]
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}
