package fleet

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// qcow2 header fields this package reads (QEMU's docs/interop/qcow2.txt):
// the magic "QFI\xfb", then at offset 8 the backing file name's offset
// (u64, big-endian) and at 16 its length (u32).
const (
	qcow2Magic       = "QFI\xfb"
	qcow2HeaderLen   = 20
	maxBackingLength = 1023 // QEMU's own limit on a backing file name
)

// BackingFile reads the backing file name a qcow2 image's header holds;
// "" for an image without one.
func BackingFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	name, err := backingFromHeader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return name, nil
}

// backingFromHeader is BackingFile on any image.
func backingFromHeader(r io.ReaderAt) (string, error) {
	var h [qcow2HeaderLen]byte
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return "", fmt.Errorf("not a qcow2 image: %w", err)
	}
	if string(h[:4]) != qcow2Magic {
		return "", fmt.Errorf("not a qcow2 image (magic %q)", h[:4])
	}
	off := binary.BigEndian.Uint64(h[8:16])
	n := binary.BigEndian.Uint32(h[16:20])
	if off == 0 || n == 0 {
		return "", nil
	}
	if n > maxBackingLength || off > 1<<20 {
		return "", fmt.Errorf("backing file name of %d bytes at offset %d: not a header QEMU writes", n, off)
	}
	name := make([]byte, n)
	if _, err := r.ReadAt(name, int64(off)); err != nil {
		return "", fmt.Errorf("backing file name: %w", err)
	}
	return string(name), nil
}
