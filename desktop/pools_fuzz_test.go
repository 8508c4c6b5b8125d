package desktop

import (
	"encoding/binary"
	"slices"
	"syscall"
	"testing"
)

// inotifyEvent encodes one event as the kernel writes it: the name padded
// with NULs to pad bytes.
func inotifyEvent(mask uint32, name string, pad int) []byte {
	b := make([]byte, syscall.SizeofInotifyEvent+pad)
	binary.NativeEndian.PutUint32(b[4:8], mask)
	binary.NativeEndian.PutUint32(b[12:16], uint32(pad))
	copy(b[syscall.SizeofInotifyEvent:], name)
	return b
}

func TestParseInotify(t *testing.T) {
	buf := slices.Concat(
		inotifyEvent(syscall.IN_MOVED_FROM, ".draft-browser-ab12", 32),
		inotifyEvent(syscall.IN_MOVED_TO, "browser", 16),
		inotifyEvent(syscall.IN_Q_OVERFLOW, "", 0),
	)
	names, overflow := parseInotify(buf)
	if !slices.Equal(names, []string{".draft-browser-ab12", "browser"}) || !overflow {
		t.Fatalf("parsed %q, overflow %v", names, overflow)
	}
	// A truncated event ends the parse with what came before it.
	names, _ = parseInotify(buf[:len(buf)-syscall.SizeofInotifyEvent-4])
	if !slices.Equal(names, []string{".draft-browser-ab12"}) {
		t.Fatalf("truncated: parsed %q", names)
	}
}

func FuzzParseInotify(f *testing.F) {
	f.Add(inotifyEvent(syscall.IN_MOVED_TO, "minimal", 16))
	f.Add(slices.Concat(inotifyEvent(syscall.IN_CREATE, "a", 4), inotifyEvent(syscall.IN_DELETE, "b", 16)))
	f.Fuzz(func(t *testing.T, buf []byte) {
		names, _ := parseInotify(buf)
		total := 0
		for _, n := range names {
			total += len(n)
		}
		if total > len(buf) {
			t.Fatalf("names of %d bytes from %d", total, len(buf))
		}
	})
}
