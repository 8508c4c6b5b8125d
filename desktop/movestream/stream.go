// Package movestream is the wire format of a live move between two hosts:
// one ordered stream of frames that carries the machine's disk overlay
// (a full pass while the guest runs, then only what changed), QEMU's
// migration stream, and the source's request to commit.
//
// Each frame is a 13-byte header (kind, offset, length; big-endian)
// followed by length bytes. One connection carries one move.
package movestream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Kind says what a frame carries.
type Kind byte

// Frame kinds, in the order a move sends them.
const (
	// Disk is a chunk of the disk overlay at Offset.
	Disk Kind = 'D'
	// DiskSize ends a pass over the disk: the overlay is Offset bytes long.
	DiskSize Kind = 'T'
	// Start asks the receiver to start the machine the state goes into;
	// it follows the first disk pass (QEMU opens the overlay at start).
	Start Kind = 'Q'
	// State is a piece of QEMU's migration stream.
	State Kind = 'S'
	// StateEnd says QEMU's migration stream is whole.
	StateEnd Kind = 'Z'
	// Commit ends the source's part; its data is the source's commit
	// request (JSON), and the receiver answers on the same connection.
	Commit Kind = 'E'
)

// MaxFrame bounds a frame's data, so a bad header cannot make a receiver
// allocate without limit.
const MaxFrame = 4 << 20

const headerLen = 13

// Frame is one frame as read. Data is valid until the next Read.
type Frame struct {
	Kind   Kind
	Offset uint64
	Data   []byte
}

// Writer writes frames; it is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	hdr [headerLen]byte
	// Sent counts the bytes written, headers included.
	sent int64
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 256<<10)} }

// Write sends one frame; data longer than MaxFrame is split.
func (w *Writer) Write(k Kind, off uint64, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		n := min(len(data), MaxFrame)
		w.hdr[0] = byte(k)
		binary.BigEndian.PutUint64(w.hdr[1:9], off)
		binary.BigEndian.PutUint32(w.hdr[9:13], uint32(n))
		if _, err := w.w.Write(w.hdr[:]); err != nil {
			return err
		}
		if _, err := w.w.Write(data[:n]); err != nil {
			return err
		}
		w.sent += int64(headerLen + n)
		data = data[n:]
		off += uint64(n)
		if len(data) == 0 {
			return nil
		}
	}
}

// Flush sends what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Flush()
}

// Sent is how many bytes the frames written so far take.
func (w *Writer) Sent() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

// StateWriter is an io.Writer of QEMU's migration stream as State frames.
func (w *Writer) StateWriter() io.Writer { return stateWriter{w} }

type stateWriter struct{ w *Writer }

func (s stateWriter) Write(p []byte) (int, error) {
	if err := s.w.Write(State, 0, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Reader reads frames.
type Reader struct {
	r   *bufio.Reader
	hdr [headerLen]byte
	buf []byte
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 256<<10)} }

// ErrBadFrame is a frame this package does not know or that is too long.
var ErrBadFrame = errors.New("bad move frame")

// Read reads the next frame. A stream that ends between frames is io.EOF;
// one cut inside a frame is io.ErrUnexpectedEOF.
func (r *Reader) Read() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	k := Kind(r.hdr[0])
	switch k {
	case Disk, DiskSize, Start, State, StateEnd, Commit:
	default:
		return Frame{}, fmt.Errorf("%w: kind %q", ErrBadFrame, r.hdr[0])
	}
	n := binary.BigEndian.Uint32(r.hdr[9:13])
	if n > MaxFrame {
		return Frame{}, fmt.Errorf("%w: %d bytes, at most %d", ErrBadFrame, n, MaxFrame)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Kind: k, Offset: binary.BigEndian.Uint64(r.hdr[1:9]), Data: r.buf}, nil
}
