package devtools

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
)

// chunkedConn is the Chromium side of a connection: it hands out data a
// few bytes per Read, then ends.
type chunkedConn struct {
	net.Conn
	data  []byte
	chunk int
}

func (c *chunkedConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.chunk, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

const switched = "HTTP/1.1 101 WebSocket Protocol Handshake\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\n\r\n"

// serverFrame is an unmasked frame of opcode op.
func serverFrame(op byte, payload []byte) []byte {
	f := []byte{0x80 | op}
	switch {
	case len(payload) < 126:
		f = append(f, byte(len(payload)))
	case len(payload) < 1<<16:
		f = append(f, 126)
		f = binary.BigEndian.AppendUint16(f, uint16(len(payload)))
	default:
		f = append(f, 127)
		f = binary.BigEndian.AppendUint64(f, uint64(len(payload)))
	}
	return append(f, payload...)
}

func readAllThrough(t *testing.T, data []byte, chunk int) []byte {
	t.Helper()
	c := WithCloseReason(&chunkedConn{data: data, chunk: chunk}, func() string { return "warmdesk: desktop d-1 was reset to its snapshot" })
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCloseReasonBetweenFrames(t *testing.T) {
	stream := []byte(switched)
	stream = append(stream, serverFrame(0x1, []byte(`{"id":1,"result":{}}`))...)
	stream = append(stream, serverFrame(0x1, bytes.Repeat([]byte("x"), 300))...)
	stream = append(stream, serverFrame(0x2, bytes.Repeat([]byte("y"), 70000))...)
	want := append(append([]byte(nil), stream...), 0x88, 2+47, 0x03, 0xe9)
	want = append(want, "warmdesk: desktop d-1 was reset to its snapshot"...)
	for _, chunk := range []int{1, 3, 7, 4096, 1 << 20} {
		if got := readAllThrough(t, stream, chunk); !bytes.Equal(got, want) {
			t.Errorf("chunks of %d: the stream does not end with the close frame (%d bytes, want %d; tail %q)", chunk, len(got), len(want), got[max(0, len(got)-60):])
		}
	}
}

func TestCloseReasonLeavesOtherEndsAlone(t *testing.T) {
	whole := serverFrame(0x1, bytes.Repeat([]byte("z"), 200))
	for name, stream := range map[string][]byte{
		"in the middle of a frame":   append([]byte(switched), whole[:50]...),
		"in the middle of a header":  append([]byte(switched), whole[:2]...),
		"after Chromium's own close": append([]byte(switched), serverFrame(0x8, []byte{0x03, 0xe8})...),
		"no switch to WebSocket":     []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
		"a head that never ends":     []byte("HTTP/1.1 101 Switching"),
	} {
		for _, chunk := range []int{1, 5, 4096} {
			if got := readAllThrough(t, stream, chunk); !bytes.Equal(got, stream) {
				t.Errorf("%s, chunks of %d: %q, want the stream unchanged", name, chunk, got)
			}
		}
	}
}

func TestCloseReasonIsBounded(t *testing.T) {
	c := WithCloseReason(&chunkedConn{data: []byte(switched), chunk: 64}, func() string { return strings.Repeat("r", 500) })
	out, _ := io.ReadAll(c)
	f := out[len(switched):]
	if len(f) != 2+125 || f[1] != 125 {
		t.Errorf("close frame of %d bytes, length byte %d: want a 125-byte payload", len(f), f[1])
	}
}

// FuzzFrameTracker: any stream, split anywhere, is followed the same way as
// when fed whole, and never panics.
func FuzzFrameTracker(f *testing.F) {
	f.Add([]byte(switched+"\x81\x05hello\x82\x7e\x01\x00"), 3)
	f.Add([]byte(switched+"\x81\xfe\x00\x02abcdxy"), 1)
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n\x81\x00"), 2)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		var whole, split frameTracker
		whole.feed(append([]byte(nil), data...))
		for i := 0; i < len(data); i += chunk {
			split.feed(append([]byte(nil), data[i:min(i+chunk, len(data))]...))
		}
		if whole.endsCleanly() != split.endsCleanly() || whole.payload != split.payload || whole.sawClose != split.sawClose {
			t.Errorf("fed whole: clean %v payload %d close %v; in chunks of %d: clean %v payload %d close %v",
				whole.endsCleanly(), whole.payload, whole.sawClose, chunk, split.endsCleanly(), split.payload, split.sawClose)
		}
	})
}
