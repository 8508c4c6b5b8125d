package libvirt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// A snapshot can hold output of the guest agent that no one read: an
// answer the guest had queued in its virtio-serial port when the machine
// was stopped. QEMU hands such output to the first client of the agent's
// socket. libvirt's agent takes anything that is not JSON, arriving while
// it waits for nothing, as a fatal error and refuses every later command
// ("not available due to an error") until the guest reopens the port,
// which it never does on its own. Seen here on a clone of a QEMU-driver
// snapshot taken while that driver's agent was mid-call: libvirtd logged
// `cannot parse json \xff{"return": 992165850055}` (the 0xFF that starts
// a guest-sync-delimited answer) and the clone's agent stayed dead.
//
// So before a restored domain resumes, hostd connects to the agent's socket
// itself (QEMU serves one client at a time; libvirt's connection, made when
// the guest's side comes back, waits in the socket's backlog), reads past
// everything stale with guest-sync-delimited once the guest runs, as the
// QEMU driver's agent does, and lets go; then QEMU accepts libvirt.

// drainTimeout bounds the drain, which holds agent calls (and a pause)
// back: a guest without an agent answers nothing, and then libvirt gets the
// socket as it is. A drain takes about 0.15 s under TCG here, seconds on a
// loaded host; one given up on while the guest runs leaves its answer to
// reach libvirt, so the bound is generous.
const drainTimeout = 10 * time.Second

// claimAgent connects to the agent's socket of a domain that has not run
// yet since its restore. It returns nil when that is not possible (the
// agent is then left to libvirt as it is).
func (m *Machine) claimAgent(ctx context.Context) net.Conn {
	dom := m.domain()
	raw, err := call(ctx, m.drv.conn, func(l *golibvirt.Libvirt) (string, error) {
		return l.DomainGetXMLDesc(dom, 0)
	})
	if err != nil {
		m.log.Warn("guest agent: cannot read the domain to drain the agent", "err", err)
		return nil
	}
	_, path := parseAgentChannel(raw)
	if path == "" {
		m.log.Warn("guest agent: the domain has no agent socket to drain")
		return nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		m.log.Warn("guest agent: cannot connect to drain it", "err", err)
		return nil
	}
	return c
}

// awaitDrain waits for the drain of a just-restored domain's agent to end
// before the domain is stopped. A pause would hold the guest's answer to
// the drain's sync back until the drain gave up and let libvirt connect;
// the answer, arriving later, would reach libvirt, which takes it as fatal
// (seen in CI: a desktop paused right after its create never had an agent
// again). The drain is bounded by drainTimeout.
func (m *Machine) awaitDrain(ctx context.Context) error {
	m.agent.mu.Lock()
	drained := m.agent.drained
	m.agent.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-m.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the guest agent's drain: %w", ctx.Err())
	}
}

// drainAgentAsync drains c in the background (the answer comes once the
// guest runs); agent calls wait until it is done. It is called before the
// domain resumes, so no call can reach libvirt before the drain.
func (m *Machine) drainAgentAsync(c net.Conn) {
	done := make(chan struct{})
	m.agent.mu.Lock()
	m.agent.drained = done
	m.agent.mu.Unlock()
	go func() {
		defer close(done)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		go func() {
			select {
			case <-m.exited:
				c.Close()
			case <-ctx.Done():
			}
		}()
		start := time.Now()
		skipped, err := drainAgent(c)
		if err != nil {
			m.log.Warn("guest agent: drain", "err", err, "stale_bytes", skipped, "took", time.Since(start))
			return
		}
		m.log.Debug("guest agent drained", "stale_bytes", skipped, "took", time.Since(start))
	}()
}

// drainAgent asks the agent for guest-sync-delimited with a fresh id and
// reads until that answer, returning how many stale bytes came before it.
func drainAgent(c net.Conn) (int, error) {
	id := rand.Int64N(1 << 40)
	cmd, _ := json.Marshal(map[string]any{"execute": "guest-sync-delimited", "arguments": map[string]int64{"id": id}})
	// A leading 0xFF resets the agent's parser, whatever it holds.
	if _, err := c.Write(append(append([]byte{0xff}, cmd...), '\n')); err != nil {
		return 0, fmt.Errorf("send sync: %w", err)
	}
	r := bufio.NewReader(c)
	skipped := 0
	for {
		// The answer starts after a 0xFF; stale answers to older syncs
		// have one too, so the id decides.
		b, err := r.ReadBytes(0xff)
		skipped += len(b)
		if err != nil {
			return skipped, fmt.Errorf("read: %w", err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			return skipped, fmt.Errorf("read: %w", err)
		}
		if syncAnswer(line, id) {
			return skipped - 1, nil
		}
		skipped += len(line)
	}
}

// syncAnswer tells whether a line is the agent's answer to the sync with id.
func syncAnswer(line []byte, id int64) bool {
	var reply struct {
		Return *int64 `json:"return"`
	}
	if err := json.Unmarshal(bytes.TrimLeft(bytes.TrimSpace(line), "\xff"), &reply); err != nil {
		return false
	}
	return reply.Return != nil && *reply.Return == id
}
