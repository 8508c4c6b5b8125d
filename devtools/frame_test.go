package devtools

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// What the guest sends is read frame by frame: a frame read back is the
// one written, and nothing a guest sends makes the reader take more than
// maxPayload or panic.
func FuzzReadFrame(f *testing.F) {
	frame := func(id uint32, kind byte, payload string) []byte {
		var hdr [headerSize]byte
		binary.BigEndian.PutUint32(hdr[0:4], id)
		hdr[4] = kind
		binary.BigEndian.PutUint32(hdr[5:9], uint32(len(payload)))
		return append(hdr[:], payload...)
	}
	f.Add(frame(0, frameHello, Magic+" 1"))
	f.Add(append(frame(3, frameData, "GET / HTTP/1.1\r\n"), frame(3, frameClose, "")...))
	f.Add([]byte{0, 0, 0, 9, 3, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			id, kind, payload, err := readFrame(r)
			if err != nil {
				return
			}
			if kind < frameHello || kind > frameClose || len(payload) > maxPayload {
				t.Fatalf("frame %d of type %d with %d bytes was accepted", id, kind, len(payload))
			}
			again, k2, p2, err := readFrame(bytes.NewReader(frame(id, kind, string(payload))))
			if err != nil || again != id || k2 != kind || !bytes.Equal(p2, payload) {
				t.Fatalf("frame %d/%d/%q did not read back: %d/%d/%q %v", id, kind, payload, again, k2, p2, err)
			}
		}
	})
}
