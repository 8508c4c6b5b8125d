// Package devtools reaches the Chromium of a desktop over the DevTools
// protocol without the guest's network: connections to Chromium's
// debugging port on the guest's loopback travel as streams over one
// virtio-serial port (the bridge), and the discovery documents Chromium
// serves are rewritten to point back through hostd.
//
// The guest's end is images/guest/cdp-bridge; the frame format is
// described there and in Session.
package devtools

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Magic begins a session's hello; the guest answers a hello with its own
// payload.
const Magic = "warmdesk-cdp-bridge-1"

// Frame types.
const (
	frameHello = 1
	frameOpen  = 2
	frameData  = 3
	frameClose = 4
)

const (
	headerSize = 9 // stream id u32, type u8, length u32
	maxPayload = 1 << 20
	chunk      = 64 << 10
	// streamBuffer is the most a stream holds for a reader that does not
	// read; past it the stream is cut, so one stuck client cannot stall
	// the session's other streams.
	streamBuffer = 64 << 20
)

// ErrNoBridge says the guest never answered: its image has no bridge.
var ErrNoBridge = errors.New("no DevTools bridge answered in the guest")

// Session is one connection to a guest's bridge, carrying any number of
// streams to Chromium's debugging port.
type Session struct {
	conn net.Conn

	wmu sync.Mutex // one frame at a time on conn

	mu      sync.Mutex
	streams map[uint32]*Stream
	next    uint32
	err     error
	done    chan struct{}
}

// Open starts a session on conn (the host's end of the virtio-serial
// port) and waits, until ctx ends, for the guest to answer. It owns conn
// from then on, also when it fails.
//
// The hello is sent again, with a new nonce, every helloFirstRetry for the
// first helloQuick hellos, then at twice the wait each time up to
// helloRetry. The first hello is often lost in a desktop just restored: the
// guest's kernel learns that hostd connected (a control message, handled
// later) after the hello's bytes, and the bridge drops its answer while the
// port still reads as hung up. The answer to any of this session's hellos
// opens it (nonces carry a per-session random part, so an earlier
// session's answers left in the port never count): the guest reads frames
// in order, so the hellos after it, which reset the guest's streams, reach
// the guest before any stream this session opens, and their answers are
// skipped like any frame of no stream. A guest that was out of step (a
// session cut mid-frame) drops what it had buffered, the hellos with it,
// and answers the next one whole.
func Open(ctx context.Context, conn net.Conn) (*Session, error) {
	s := &Session{conn: conn, streams: map[uint32]*Stream{}, done: make(chan struct{})}
	h := &handshake{answers: make(chan string), verdict: make(chan bool), ended: make(chan error, 1), gone: make(chan struct{})}
	defer close(h.gone)
	go s.readLoop(h)
	session := rand.Uint64()
	sent := map[string]bool{}
	wait := helloFirstRetry
	retry := time.NewTimer(wait)
	defer retry.Stop()
	for n := 1; ; n++ {
		hello := fmt.Sprintf("%s %016x-%d", Magic, session, n)
		sent[hello] = true
		if err := s.write(0, frameHello, []byte(hello)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("devtools bridge: %w", err)
		}
	wait:
		for {
			select {
			case got := <-h.answers:
				h.verdict <- sent[got]
				if sent[got] {
					return s, nil
				}
			case <-retry.C:
				if n >= helloQuick {
					wait = min(2*wait, helloRetry)
				}
				retry.Reset(wait)
				break wait
			case err := <-h.ended:
				conn.Close()
				return nil, fmt.Errorf("%w: %w", ErrNoBridge, err)
			case <-ctx.Done():
				conn.Close()
				return nil, fmt.Errorf("%w (waited %w)", ErrNoBridge, ctx.Err())
			}
		}
	}
}

// handshake is how the reader and Open talk while the session opens: the
// reader passes each hello answer and learns whether it was the one.
type handshake struct {
	answers chan string
	verdict chan bool
	ended   chan error
	gone    chan struct{} // Open has returned
}

// opened reports whether the reader may go on as the session's reader.
func (h *handshake) opened(answer string) bool {
	select {
	case h.answers <- answer:
	case <-h.gone:
		return false
	}
	select {
	case ok := <-h.verdict:
		return ok
	case <-h.gone:
		return false
	}
}

// helloFirstRetry, helloQuick and helloRetry say how long a hello waits
// for its answer before the next.
const (
	helloFirstRetry = 50 * time.Millisecond
	helloQuick      = 10
	helloRetry      = 500 * time.Millisecond
)

// Done is closed when the session has ended; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended, nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and every stream on it.
func (s *Session) Close() error {
	s.fail(errors.New("devtools bridge closed"))
	return nil
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	close(s.done)
	s.mu.Unlock()
	s.conn.Close()
	for _, st := range streams {
		st.end(err)
	}
}

// Dial opens a new connection to Chromium's debugging port. The guest
// refusing it (Chromium not running) shows as the stream ending with the
// guest's reason at its first read.
func (s *Session) Dial(ctx context.Context) (net.Conn, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.next++
	st := newStream(s, s.next)
	s.streams[st.id] = st
	s.mu.Unlock()
	if err := s.write(st.id, frameOpen, nil); err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Session) readLoop(h *handshake) {
	open := false
	for {
		id, kind, payload, err := readFrame(s.conn)
		if err != nil {
			if !open {
				h.ended <- err
				return
			}
			s.fail(fmt.Errorf("devtools bridge: %w", err))
			return
		}
		if !open {
			// What an earlier session left in the port, until the answer
			// to this one's latest hello.
			if id == 0 && kind == frameHello {
				open = h.opened(string(payload))
			}
			continue
		}
		s.mu.Lock()
		st := s.streams[id]
		if kind == frameClose {
			delete(s.streams, id)
		}
		s.mu.Unlock()
		if st == nil {
			continue
		}
		switch kind {
		case frameData:
			st.deliver(payload)
		case frameClose:
			reason := io.EOF
			if len(payload) > 0 {
				reason = fmt.Errorf("devtools bridge: %s", payload)
			}
			st.end(reason)
		}
	}
}

func (s *Session) write(id uint32, kind byte, payload []byte) error {
	var hdr [headerSize]byte
	binary.BigEndian.PutUint32(hdr[0:4], id)
	hdr[4] = kind
	binary.BigEndian.PutUint32(hdr[5:9], uint32(len(payload)))
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.conn.Write(append(hdr[:], payload...)); err != nil {
		s.fail(fmt.Errorf("devtools bridge: %w", err))
		return err
	}
	return nil
}

// closeStream tells the guest a stream is done and forgets it.
func (s *Session) closeStream(id uint32) {
	s.mu.Lock()
	_, open := s.streams[id]
	delete(s.streams, id)
	failed := s.err != nil
	s.mu.Unlock()
	if open && !failed {
		s.write(id, frameClose, nil)
	}
}

// readFrame reads one frame; a length past maxPayload is an error (the
// stream is out of step).
func readFrame(r io.Reader) (id uint32, kind byte, payload []byte, err error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	id, kind = binary.BigEndian.Uint32(hdr[0:4]), hdr[4]
	n := binary.BigEndian.Uint32(hdr[5:9])
	if n > maxPayload || kind < frameHello || kind > frameClose {
		return 0, 0, nil, fmt.Errorf("bad frame (type %d, %d bytes): the bridge is out of step", kind, n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return id, kind, payload, nil
}

// Stream is one connection to Chromium through the bridge.
type Stream struct {
	s  *Session
	id uint32

	mu       sync.Mutex
	cond     *sync.Cond
	buf      bytes.Buffer
	err      error // why reads end, once buf is drained
	closed   bool
	deadline time.Time
	timer    *time.Timer
}

var _ net.Conn = (*Stream)(nil)

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id}
	st.cond = sync.NewCond(&st.mu)
	return st
}

func (st *Stream) deliver(p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.err != nil {
		return
	}
	if st.buf.Len()+len(p) > streamBuffer {
		st.err = fmt.Errorf("devtools bridge: the reader fell %d MiB behind", streamBuffer>>20)
		st.cond.Broadcast()
		go st.s.closeStream(st.id)
		return
	}
	st.buf.Write(p)
	st.cond.Broadcast()
}

func (st *Stream) end(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
	}
	st.cond.Broadcast()
}

func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.buf.Len() == 0 && st.err == nil && !st.closed && !st.expired() {
		st.cond.Wait()
	}
	switch {
	case st.buf.Len() > 0:
		return st.buf.Read(p)
	case st.closed:
		return 0, net.ErrClosed
	case st.err != nil:
		return 0, st.err
	default:
		return 0, os.ErrDeadlineExceeded
	}
}

func (st *Stream) expired() bool {
	return !st.deadline.IsZero() && !time.Now().Before(st.deadline)
}

func (st *Stream) Write(p []byte) (int, error) {
	st.mu.Lock()
	closed, err := st.closed, st.err
	st.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	if err != nil && err != io.EOF {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), chunk)
		if err := st.s.write(st.id, frameData, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

func (st *Stream) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	if st.timer != nil {
		st.timer.Stop()
	}
	st.cond.Broadcast()
	st.mu.Unlock()
	st.s.closeStream(st.id)
	return nil
}

// SetReadDeadline makes a blocked Read return os.ErrDeadlineExceeded at t.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.deadline = t
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	if !t.IsZero() {
		st.timer = time.AfterFunc(time.Until(t), func() {
			st.mu.Lock()
			st.cond.Broadcast()
			st.mu.Unlock()
		})
	}
	st.cond.Broadcast()
	return nil
}

// SetWriteDeadline is accepted and ignored: a write returns once the frame
// is on the session's connection.
func (st *Stream) SetWriteDeadline(time.Time) error { return nil }

func (st *Stream) SetDeadline(t time.Time) error { return st.SetReadDeadline(t) }

func (st *Stream) LocalAddr() net.Addr  { return bridgeAddr(fmt.Sprintf("stream %d", st.id)) }
func (st *Stream) RemoteAddr() net.Addr { return bridgeAddr("chromium") }

type bridgeAddr string

func (a bridgeAddr) Network() string { return "devtools-bridge" }
func (a bridgeAddr) String() string  { return string(a) }
