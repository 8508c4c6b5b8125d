package qemu

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// nextNodeName names the block node of the next overlay: disk0 -> disk1.
func nextNodeName(node string) string {
	n := 0
	if v, err := strconv.Atoi(strings.TrimPrefix(node, "disk")); err == nil {
		n = v
	}
	return "disk" + strconv.Itoa(n+1)
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
