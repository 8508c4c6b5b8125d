// Package qcow2 reads and rewrites the backing file name in a qcow2
// image's header (QEMU's docs/interop/qcow2.txt), for images no QEMU
// holds active.
package qcow2

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// qcow2 header fields this package reads: the magic "QFI\xfb", then at
// offset 8 the backing file name's offset (u64, big-endian), at 16 its
// length (u32), and at 20 the cluster size's bits (u32).
const (
	qcow2Magic       = "QFI\xfb"
	qcow2HeaderLen   = 24
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

// SetBackingFile rewrites the backing file name of the image at path, in
// place: the new name goes where the old one was, which must stay inside
// the header's cluster (QEMU's own images keep the rest of that cluster
// free). Only for an image no QEMU holds active; one that holds it
// inactive (an incoming migration's) reads the header again when it
// activates the image.
func SetBackingFile(path, name string) error {
	if len(name) == 0 || len(name) > maxBackingLength {
		return fmt.Errorf("backing file name of %d bytes: use 1 to %d", len(name), maxBackingLength)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [qcow2HeaderLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || string(h[:4]) != qcow2Magic {
		return fmt.Errorf("%s: not a qcow2 image", path)
	}
	off := binary.BigEndian.Uint64(h[8:16])
	bits := binary.BigEndian.Uint32(h[20:24])
	if off == 0 {
		return fmt.Errorf("%s: the image has no backing file to rename", path)
	}
	if bits < 9 || bits > 21 || off+uint64(len(name)) > 1<<bits {
		return fmt.Errorf("%s: a backing file name of %d bytes at offset %d does not fit the header's cluster", path, len(name), off)
	}
	if _, err := f.WriteAt([]byte(name), int64(off)); err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(name)))
	if _, err := f.WriteAt(n[:], 16); err != nil {
		return err
	}
	return f.Sync()
}
