package qemuvm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
)

// LogTail returns the last n lines of a log file, for error messages ("" if
// it cannot be read).
func LogTail(path string, n int) string {
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

// WatchConsole connects to a machine's serial console socket and calls fn
// with each line the guest prints (the guest reports readiness there),
// until the console closes, ctx ends or done (the machine's end) closes.
func WatchConsole(ctx context.Context, path string, done <-chan struct{}, fn func(string)) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	watchLines(ctx, conn, done, fn)
	return nil
}

// watchLines reads conn in the background and calls fn with each line,
// until conn ends, ctx ends or done closes; an endless line is handed over
// in pieces.
func watchLines(ctx context.Context, conn net.Conn, done <-chan struct{}, fn func(string)) {
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		conn.Close()
	}()
	go func() {
		defer conn.Close()
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
				fn(string(bytes.TrimRight(buf[:i], "\r")))
				buf = buf[i+1:]
			}
			if len(buf) > 4096 {
				fn(string(buf))
				buf = buf[:0]
			}
			if err != nil {
				return
			}
		}
	}()
}
