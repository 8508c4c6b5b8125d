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
// (may be nil) with each line the guest prints (the guest reports
// readiness there), until the console closes, ctx ends or done (the
// machine's end) closes. With logPath set, every line also goes to that
// file, capped at ConsoleLogMax (see CappedLog): a guest printing without
// end cannot fill the host's disk.
func WatchConsole(ctx context.Context, path, logPath string, done <-chan struct{}, fn func(string)) error {
	var log *CappedLog
	if logPath != "" {
		var err error
		if log, err = OpenCappedLog(logPath, ConsoleLogMax); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		log.Close()
		return fmt.Errorf("console: %w", err)
	}
	watchLines(ctx, conn, done, func(line string) {
		log.WriteLine(line)
		if fn != nil {
			fn(line)
		}
	}, log.Close)
	return nil
}

// ConsoleLogMax bounds a machine's console log; one older file beside it
// (NAME.1) holds the lines before.
const ConsoleLogMax = 1 << 20

// CappedLog is a log file that, about to pass its size bound, becomes
// NAME.1 (replacing the one before) and starts again empty.
type CappedLog struct {
	path string
	max  int64
	f    *os.File
	size int64
}

// OpenCappedLog opens (appending) or makes the log at path.
func OpenCappedLog(path string, max int64) (*CappedLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CappedLog{path: path, max: max, f: f, size: fi.Size()}, nil
}

// WriteLine appends line and a newline; a line longer than the bound is
// cut to it. Errors are dropped: the log is for people, and the console
// must keep flowing.
func (l *CappedLog) WriteLine(line string) {
	if l == nil || l.f == nil {
		return
	}
	b := []byte(line + "\n")
	if int64(len(b)) > l.max {
		b = append(b[:l.max-1], '\n')
	}
	if l.size+int64(len(b)) > l.max {
		l.f.Close()
		l.f = nil
		if err := os.Rename(l.path, l.path+".1"); err != nil {
			return
		}
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return
		}
		l.f, l.size = f, 0
	}
	n, _ := l.f.Write(b)
	l.size += int64(n)
}

// Close closes the file.
func (l *CappedLog) Close() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// watchLines reads conn in the background and calls fn with each line,
// until conn ends, ctx ends or done closes, then calls end; an endless
// line is handed over in pieces.
func watchLines(ctx context.Context, conn net.Conn, done <-chan struct{}, fn func(string), end func()) {
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		conn.Close()
	}()
	go func() {
		defer end()
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
