package vnc

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Small helpers for the big-endian fields RFB uses everywhere.

func readU8(r io.Reader, scratch []byte) (uint8, error) {
	if _, err := io.ReadFull(r, scratch[:1]); err != nil {
		return 0, err
	}
	return scratch[0], nil
}

func readU32(r io.Reader, scratch []byte) (uint32, error) {
	if _, err := io.ReadFull(r, scratch[:4]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(scratch), nil
}

// readString reads a u32 length and that many bytes, refusing lengths over
// limit before allocating anything.
func readString(r io.Reader, limit int) (string, error) {
	var scratch [4]byte
	n, err := readU32(r, scratch[:])
	if err != nil {
		return "", err
	}
	if uint64(n) > uint64(limit) {
		return "", fmt.Errorf("string of %d bytes over the limit of %d: %w", n, limit, ErrProtocol)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
