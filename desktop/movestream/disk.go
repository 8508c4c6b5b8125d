package movestream

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
	"os"
)

// ChunkSize is the unit a disk pass compares and sends.
const ChunkSize = 64 << 10

// DiskPasses sends a file in passes: the first whole (its chunks of zeros
// left out: the receiver's file starts empty), each later one only the
// chunks that differ from what the receiver holds. The first pass runs
// while the guest still writes; the last, once its machine stopped,
// leaves the receiver's copy equal to the file.
type DiskPasses struct {
	seed maphash.Seed
	// sums are what the receiver holds, chunk by chunk; zero for a chunk
	// of zeros (or none yet).
	sums   []uint64
	passes int
}

// Send runs one pass over path into w, ending with its DiskSize frame,
// and returns the bytes of data it sent.
func (p *DiskPasses) Send(path string, w *Writer) (int64, error) {
	if p.passes == 0 {
		p.seed = maphash.MakeSeed()
	}
	p.passes++
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("disk pass: %w", err)
	}
	defer f.Close()
	buf := make([]byte, ChunkSize)
	var sent, off int64
	for i := 0; ; i++ {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			sum := maphash.Bytes(p.seed, buf[:n])
			if i >= len(p.sums) {
				p.sums = append(p.sums, 0)
			}
			held := p.sums[i]
			zeros := isZero(buf[:n])
			// A chunk the receiver lacks reads as zeros there.
			if (held != 0 || !zeros) && held != sum {
				if err := w.Write(Disk, uint64(off), buf[:n]); err != nil {
					return sent, err
				}
				sent += int64(n)
			}
			if zeros && held == 0 {
				sum = 0
			}
			p.sums[i] = sum
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return sent, fmt.Errorf("disk pass: %w", err)
		}
	}
	if n := int((off + ChunkSize - 1) / ChunkSize); n < len(p.sums) {
		p.sums = p.sums[:n]
	}
	return sent, w.Write(DiskSize, uint64(off), nil)
}

func isZero(b []byte) bool {
	return len(b) == 0 || b[0] == 0 && bytes.Equal(b[1:], b[:len(b)-1])
}

// ApplyDisk writes a Disk or DiskSize frame into f.
func ApplyDisk(f *os.File, fr Frame) error {
	switch fr.Kind {
	case Disk:
		_, err := f.WriteAt(fr.Data, int64(fr.Offset))
		return err
	case DiskSize:
		return f.Truncate(int64(fr.Offset))
	}
	return fmt.Errorf("%w: %q is not a disk frame", ErrBadFrame, fr.Kind)
}
