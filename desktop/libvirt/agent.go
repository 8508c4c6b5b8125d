package libvirt

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// agentState is libvirt's view of the guest agent channel, with the values
// of its agent lifecycle event.
type agentState int32

const (
	agentUnknown      agentState = 0
	agentConnected    agentState = agentState(golibvirt.ConnectDomainEventAgentLifecycleStateConnected)
	agentDisconnected agentState = agentState(golibvirt.ConnectDomainEventAgentLifecycleStateDisconnected)
)

// agentNoDeadline is the timeout libvirt is given for an agent command
// whose context has no deadline.
const agentNoDeadline = 30 * time.Second

// agent sends guest agent commands through libvirt (QEMUDomainAgentCommand):
// libvirt owns the agent's socket and synchronises with the agent itself.
// libvirt only talks to an agent it has seen connect; right after a
// restore the guest's side of the port comes back once the guest runs, so
// a call waits for libvirt's agent lifecycle event instead of failing.
type agent struct {
	m *Machine

	mu      sync.Mutex
	state   agentState
	changed chan struct{} // closed and replaced on every state change

	// drained is closed once no stale output of the guest's agent can
	// reach libvirt (see drain.go); calls wait for it.
	drained chan struct{}
}

var _ desktop.GuestAgent = (*agent)(nil)

func newAgent(m *Machine) *agent {
	a := &agent{m: m, changed: make(chan struct{}), drained: make(chan struct{})}
	close(a.drained) // until a restore has something to drain
	return a
}

func (a *agent) set(s agentState) {
	a.mu.Lock()
	a.state = s
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

func (a *agent) current() (agentState, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, a.changed
}

// Call runs one guest agent command.
func (a *agent) Call(ctx context.Context, command string, args, result any) error {
	cmd, err := encodeQMP(command, args)
	if err != nil {
		return fmt.Errorf("guest agent %w", err)
	}
	a.mu.Lock()
	drained := a.drained
	a.mu.Unlock()
	select {
	case <-drained:
	case <-a.m.exited:
		return fmt.Errorf("%w: guest agent %s: the machine %s", desktop.ErrUnavailable, command, a.m.ExitReason())
	case <-ctx.Done():
		return fmt.Errorf("%w: guest agent %s: %w", desktop.ErrUnavailable, command, ctx.Err())
	}
	for {
		state, changed := a.current()
		life := a.m.nextLifeEvent()
		dom := a.m.domain()
		timeout := agentTimeout(ctx)
		reply, err := call(ctx, a.m.drv.conn, func(l *golibvirt.Libvirt) (golibvirt.OptString, error) {
			return l.QEMUDomainAgentCommand(dom, cmd, timeout, 0)
		})
		if err == nil {
			if len(reply) == 0 {
				return fmt.Errorf("guest agent %s: empty reply", command)
			}
			ret, err := parseQMPReply([]byte(reply[0]))
			if err != nil {
				return fmt.Errorf("guest agent %s: %w", command, err)
			}
			if result != nil && len(ret) > 0 {
				if err := json.Unmarshal(ret, result); err != nil {
					return fmt.Errorf("guest agent %s: decode: %w", command, err)
				}
			}
			return nil
		}
		switch libvirtCode(err) {
		case golibvirt.ErrAgentUnresponsive:
		case golibvirt.ErrOperationInvalid:
			// The domain is paused (libvirt refuses at once): wait for it
			// to run again, as a call would under the QEMU driver.
			select {
			case <-life:
				continue
			case <-a.m.exited:
				return fmt.Errorf("%w: guest agent %s: the machine %s", desktop.ErrUnavailable, command, a.m.ExitReason())
			case <-ctx.Done():
				return fmt.Errorf("%w: guest agent %s: the domain is not running: %w", desktop.ErrUnavailable, command, ctx.Err())
			}
		default:
			return fmt.Errorf("guest agent %s: %w", command, err)
		}
		if state == agentUnknown {
			state = a.probe(ctx)
		}
		if state == agentConnected {
			// Connected but not answering in time: the guest is busy or
			// its agent hangs.
			return fmt.Errorf("guest agent %s: %w", command, err)
		}
		select {
		case <-changed:
		case <-a.m.exited:
			return fmt.Errorf("%w: guest agent %s: the machine %s", desktop.ErrUnavailable, command, a.m.ExitReason())
		case <-ctx.Done():
			return fmt.Errorf("%w: guest agent %s: the guest's agent did not connect: %w", desktop.ErrUnavailable, command, ctx.Err())
		}
	}
}

// agentTimeout turns ctx's deadline into libvirt's agent timeout, in whole
// seconds (at least one).
func agentTimeout(ctx context.Context) int32 {
	left := agentNoDeadline
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	return int32(max(1, min(math.Ceil(left.Seconds()), 3600)))
}

// probe reads the agent channel's state from the live domain XML, for a
// machine that has seen no agent event (found again after a restart).
func (a *agent) probe(ctx context.Context) agentState {
	dom := a.m.domain()
	raw, err := call(ctx, a.m.drv.conn, func(l *golibvirt.Libvirt) (string, error) {
		return l.DomainGetXMLDesc(dom, 0)
	})
	if err != nil {
		return agentUnknown
	}
	st, _ := parseAgentChannel(raw)
	return st
}

// parseAgentChannel finds the guest agent channel in a live domain XML and
// reads its state and the path of the socket libvirt had QEMU bind.
func parseAgentChannel(domainXML string) (agentState, string) {
	var d struct {
		Channels []struct {
			Source struct {
				Path string `xml:"path,attr"`
			} `xml:"source"`
			Target struct {
				Name  string `xml:"name,attr"`
				State string `xml:"state,attr"`
			} `xml:"target"`
		} `xml:"devices>channel"`
	}
	if err := xml.Unmarshal([]byte(domainXML), &d); err != nil {
		return agentUnknown, ""
	}
	for _, c := range d.Channels {
		if c.Target.Name != qemuvm.AgentPortName {
			continue
		}
		switch c.Target.State {
		case "connected":
			return agentConnected, c.Source.Path
		case "disconnected":
			return agentDisconnected, c.Source.Path
		}
		return agentUnknown, c.Source.Path
	}
	return agentUnknown, ""
}
