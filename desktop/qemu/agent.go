package qemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// agentConn speaks qemu-guest-agent's protocol over the chardev socket QEMU
// serves for the virtio-serial port. One command at a time: QGA answers in
// order and has no ids. After any doubt (a timeout, a broken line) the
// connection is dropped and the next call resynchronises with
// guest-sync-delimited, so a late answer is never taken for the next one.
type agentConn struct {
	path string

	mu sync.Mutex // serialises calls: QGA answers one at a time
	r  *bufio.Reader

	// cmu guards conn and closed, so close can interrupt a call in
	// flight instead of waiting behind mu for the call's deadline.
	cmu    sync.Mutex
	conn   net.Conn
	closed bool
}

var _ desktop.GuestAgent = (*agentConn)(nil)

const maxAgentReply = 64 << 20 // guest-file-read returns base64 chunks

// qgaError is an error the guest agent returned.
type qgaError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *qgaError) Error() string { return "guest agent: " + e.Class + ": " + e.Desc }

// Call runs one guest agent command.
func (a *agentConn) Call(ctx context.Context, command string, args, result any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.ensureRetrying(ctx); err != nil {
		return err
	}
	line, err := encodeAgentCommand(command, args)
	if err != nil {
		return err
	}
	reply, err := a.roundTrip(ctx, line, nil)
	if err != nil {
		a.drop()
		return fmt.Errorf("guest agent %s: %w", command, err)
	}
	if reply.Error != nil {
		return fmt.Errorf("guest agent %s: %w", command, reply.Error)
	}
	if result != nil && len(reply.Return) > 0 {
		if err := json.Unmarshal(reply.Return, result); err != nil {
			return fmt.Errorf("guest agent %s: decode: %w", command, err)
		}
	}
	return nil
}

type agentReply struct {
	Return json.RawMessage `json:"return"`
	Error  *qgaError       `json:"error"`
}

// syncAttempts bounds reconnections while synchronising. A clone of a
// snapshot taken while the agent was connected starts with the guest's
// agent closing and reopening its port, which can end the first
// connection (EOF) before it is synchronised; nothing was sent yet, so
// trying again is safe.
const syncAttempts = 3

func (a *agentConn) ensureRetrying(ctx context.Context) error {
	var err error
	for range syncAttempts {
		if err = a.ensure(ctx); err == nil || ctx.Err() != nil || !errors.Is(err, io.EOF) {
			return err
		}
	}
	return err
}

// ensure connects and synchronises when there is no healthy connection.
func (a *agentConn) ensure(ctx context.Context) error {
	a.cmu.Lock()
	conn, closed := a.conn, a.closed
	a.cmu.Unlock()
	if closed {
		return fmt.Errorf("%w: the machine has ended", desktop.ErrUnavailable)
	}
	if conn != nil {
		return nil
	}
	conn, err := dialUnix(ctx, a.path)
	if err != nil {
		return fmt.Errorf("%w: guest agent socket: %w", desktop.ErrUnavailable, err)
	}
	a.cmu.Lock()
	if a.closed {
		a.cmu.Unlock()
		conn.Close()
		return fmt.Errorf("%w: the machine has ended", desktop.ErrUnavailable)
	}
	a.conn = conn
	a.cmu.Unlock()
	a.r = bufio.NewReaderSize(conn, 64<<10)
	id := rand.Int64N(1 << 40)
	sync, _ := json.Marshal(map[string]any{"execute": "guest-sync-delimited", "arguments": map[string]int64{"id": id}})
	// The agent answers guest-sync-delimited with 0xFF first, which marks
	// where its answer starts in a stream that may hold stale output.
	want, _ := json.Marshal(id)
	line := append([]byte{0xff}, append(sync, '\n')...)
	for {
		reply, err := a.roundTrip(ctx, line, want)
		line = nil // stale answers to older syncs: keep reading, do not resend
		if err != nil {
			a.drop()
			return fmt.Errorf("%w: guest agent did not answer: %w", desktop.ErrUnavailable, err)
		}
		if bytes.Equal(bytes.TrimSpace(reply.Return), want) {
			return nil
		}
	}
}

// roundTrip writes one line and reads one reply. With sync set, it skips
// to the 0xFF delimiter and returns the first reply after it.
func (a *agentConn) roundTrip(ctx context.Context, line, sync []byte) (agentReply, error) {
	a.cmu.Lock()
	conn := a.conn
	a.cmu.Unlock()
	if conn == nil {
		return agentReply{}, fmt.Errorf("%w: the machine has ended", desktop.ErrUnavailable)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if line != nil {
		if _, err := conn.Write(line); err != nil {
			return agentReply{}, ctxErr(ctx, err)
		}
	}
	if sync != nil {
		if _, err := a.r.ReadSlice(0xff); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return agentReply{}, ctxErr(ctx, err)
		}
	}
	for {
		raw, err := readAgentLine(a.r)
		if err != nil {
			return agentReply{}, ctxErr(ctx, err)
		}
		raw = bytes.TrimLeft(raw, "\xff")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var reply agentReply
		if err := json.Unmarshal(raw, &reply); err != nil {
			return agentReply{}, fmt.Errorf("malformed reply %.80q: %w", raw, err)
		}
		if reply.Return == nil && reply.Error == nil {
			continue // not an answer
		}
		return reply, nil
	}
}

func readAgentLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxAgentReply {
			return nil, errors.New("reply too long")
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", desktop.ErrUnavailable, ctx.Err())
	}
	return err
}

func (a *agentConn) drop() {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	if a.conn != nil {
		a.conn.Close()
		a.conn = nil
	}
}

// disconnect drops the connection; the next call reconnects. It first
// waits, up to quiesce, for a call in flight to get its answer, so that no
// answer is left in the guest's channel: a snapshot taken then would hand
// every clone a stale reply, which libvirt's agent client cannot skip.
func (a *agentConn) disconnect(quiesce time.Duration) {
	idle := make(chan struct{})
	go func() {
		a.mu.Lock()
		close(idle)
		a.drop()
		a.mu.Unlock()
	}()
	t := time.NewTimer(quiesce)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		a.drop() // a long call (an exec): cut it off
	}
}

// close ends the channel for good: the machine is going.
func (a *agentConn) close() {
	a.cmu.Lock()
	a.closed = true
	a.cmu.Unlock()
	a.drop()
}

func encodeAgentCommand(command string, args any) ([]byte, error) {
	cmd := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{command, args}
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("guest agent %s: encode: %w", command, err)
	}
	return append(b, '\n'), nil
}
