package qemu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// nextOverlayPath names the overlay that goes on top of path:
// disk-0.qcow2 -> disk-1.qcow2.
func nextOverlayPath(path string) string {
	dir, base := filepath.Split(path)
	n := 0
	if s, ok := strings.CutPrefix(strings.TrimSuffix(base, ".qcow2"), "disk-"); ok {
		if v, err := strconv.Atoi(s); err == nil {
			n = v + 1
		}
	}
	return filepath.Join(dir, "disk-"+strconv.Itoa(n)+".qcow2")
}

// nextNodeName names the block node of the next overlay: disk0 -> disk1.
func nextNodeName(node string) string {
	n := 0
	if v, err := strconv.Atoi(strings.TrimPrefix(node, "disk")); err == nil {
		n = v
	}
	return "disk" + strconv.Itoa(n+1)
}

// runTool runs a host tool and returns its combined output on failure.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// copySparse copies a file, keeping its holes (SEEK_DATA/SEEK_HOLE), into a
// new file.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		out.Close()
		if !ok {
			os.Remove(dst)
		}
	}()
	size := info.Size()
	var off int64
	for off < size {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	ok = true
	return nil
}

// sparsify punches holes where a file holds whole pages of zeros, and
// returns how many bytes it freed. A migration into a template writes every
// page of its shared memory file, zero pages too (QEMU reads a page to see
// whether it is already zero, and on tmpfs a read allocates it), so a 1 GiB
// guest's file would hold 1 GiB where a few hundred MB are data. The file
// is scanned through a read-only mapping (no copy), half by each of two
// goroutines.
func sparsify(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	const page = 4096
	size := info.Size() / page * page
	if size == 0 {
		return 0, nil
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(mem)
	type run struct{ off, n int64 }
	scan := func(from, to int64) []run {
		var runs []run
		for p := from; p < to; p += page {
			if !isZero(mem[p : p+page]) {
				continue
			}
			if k := len(runs) - 1; k >= 0 && runs[k].off+runs[k].n == p {
				runs[k].n += page
			} else {
				runs = append(runs, run{p, page})
			}
		}
		return runs
	}
	half := size / 2 / page * page
	var first []run
	done := make(chan struct{})
	go func() { first = scan(0, half); close(done) }()
	second := scan(half, size)
	<-done
	var freed int64
	for _, r := range append(first, second...) {
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r.off, r.n); err != nil {
			return freed, err
		}
		freed += r.n
	}
	return freed, nil
}

// isZero reports whether b is all zero bytes, 32 bytes per iteration (a
// template's memory is scanned whole, 1 GiB for a 1 GiB guest).
func isZero(b []byte) bool {
	le := binary.LittleEndian
	for len(b) >= 32 {
		if le.Uint64(b)|le.Uint64(b[8:])|le.Uint64(b[16:])|le.Uint64(b[24:]) != 0 {
			return false
		}
		b = b[32:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
