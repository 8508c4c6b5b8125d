package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// QEMU's stream netdev frames each Ethernet frame with its length as a
// 4-byte big-endian number. Frames are at most an MTU plus the Ethernet
// header (the NIC offers no segmentation offload over a stream).
const maxFrame = 65536

// linkSlot holds the current link to QEMU and a buffered writer on it.
// Swapping the link never waits for a write: QEMU stops reading while the
// guest is paused or takes no frames, and a write then blocks until the
// link is closed, which is what set and drop do first.
type linkSlot struct {
	mu   sync.Mutex // guards conn and w, never held across I/O
	conn net.Conn
	w    *bufio.Writer
	wmu  sync.Mutex // serialises writes (sendFrames is the only writer)
}

// set replaces the link, closing the old one.
func (l *linkSlot) set(c net.Conn) {
	l.mu.Lock()
	old := l.conn
	l.conn, l.w = c, nil
	if c != nil {
		l.w = bufio.NewWriterSize(c, 256<<10)
	}
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// drop forgets c if it is still the link (it failed).
func (l *linkSlot) drop(c net.Conn) {
	l.mu.Lock()
	if l.conn == c {
		l.conn, l.w = nil, nil
	}
	l.mu.Unlock()
	c.Close()
}

// write sends one frame; without a link the frame is lost, as on a cable
// pulled out. flush says whether more frames are waiting.
func (l *linkSlot) write(frame []byte, flush bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	c, w := l.conn, l.w
	l.mu.Unlock()
	if w == nil {
		return
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(frame)))
	w.Write(hdr[:])
	w.Write(frame)
	if flush {
		if err := w.Flush(); err != nil {
			l.drop(c)
		}
	}
}

// Attach makes conn (QEMU's NIC stream) the network's link, replacing any
// earlier one, and reads the guest's frames from it until it closes.
func (n *Network) Attach(conn net.Conn) {
	if n.ctx.Err() != nil { // closed meanwhile (the desktop went)
		conn.Close()
		return
	}
	n.link.set(conn)
	n.done.Add(1)
	go func() {
		defer n.done.Done()
		err := readFrames(conn, n.inject)
		n.link.drop(conn)
		if err != nil && !errors.Is(err, net.ErrClosed) && n.ctx.Err() == nil {
			n.cfg.Logger.Warn("egress: link ended", "err", err)
		}
	}()
}

func (n *Network) inject(frame []byte) {
	if n.refuseLoopback(frame) {
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	n.nic.InjectInbound(0, pkt)
	pkt.DecRef()
}

// sendFrames carries the stack's outgoing frames to the link.
func (n *Network) sendFrames() {
	for {
		pkt := n.nic.ReadContext(n.ctx)
		if pkt == nil {
			return
		}
		v := pkt.ToView()
		pkt.DecRef()
		n.link.write(v.AsSlice(), n.nic.NumQueued() == 0)
		v.Release()
	}
}

// readFrames calls deliver with each length-prefixed frame read from r
// until r ends; a frame length out of range is an error (the stream is not
// QEMU's).
func readFrames(r io.Reader, deliver func([]byte)) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size < 14 || size > maxFrame {
			return fmt.Errorf("frame of %d bytes: not QEMU's stream framing", size)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			return err
		}
		deliver(frame)
	}
}
