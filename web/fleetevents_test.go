package web

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// Events pass on whole, with their blank line; comments, other fields and
// blocks without data do not; a stream that ends says so.
func TestSplitEvents(t *testing.T) {
	in := ": warmdesk events\n\nevent: desktop.state\ndata: {\"a\":1}\n\n: keepalive\n\nid: 7\nevent: lonely\n\nevent: x\r\ndata: 2\r\n\r\n"
	var got []string
	err := splitEvents(strings.NewReader(in), func(b []byte) { got = append(got, string(b)) })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the end of the stream: %v", err)
	}
	want := []string{"event: desktop.state\ndata: {\"a\":1}\n\n", "event: x\ndata: 2\n\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	long := "data: " + strings.Repeat("x", maxEventLine) + "\n\n"
	if err := splitEvents(strings.NewReader(long), func([]byte) { t.Error("a line past the bound passed") }); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a line past the bound: %v", err)
	}
}

// Whatever a host sends, what passes on is whole events: each ends with a
// blank line, holds no other, and has a data line.
func FuzzSplitEvents(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\n: c\n\n"))
	f.Add([]byte("data: x\r\n\r\ndata:\n\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		splitEvents(bytes.NewReader(in), func(b []byte) {
			if !bytes.HasSuffix(b, []byte("\n\n")) || bytes.Contains(b[:len(b)-1], []byte("\n\n")) || !bytes.Contains(b, []byte("data:")) {
				t.Fatalf("passed on %q", b)
			}
		})
	})
}
