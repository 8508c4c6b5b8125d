package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// QMPError is an error QEMU returned to a command sent through libvirt.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return "qemu: " + e.Class + ": " + e.Desc }

// monitor is a domain's QEMU monitor as the Monitor qemuvm's shared QMP
// code speaks to: commands through libvirt's monitor passthrough
// (QEMUDomainMonitorCommand), with the same JSON the QEMU driver sends on
// its own socket, and events through libvirt's QEMU monitor event stream.
type monitor struct{ m *Machine }

var _ qemuvm.Monitor = monitor{}

func (m *Machine) monitor() monitor { return monitor{m} }

// Execute sends one QMP command.
func (mon monitor) Execute(ctx context.Context, command string, args, result any) error {
	cmd, err := encodeQMP(command, args)
	if err != nil {
		return err
	}
	dom := mon.m.domain()
	reply, err := call(ctx, mon.m.drv.conn, func(l *golibvirt.Libvirt) (string, error) {
		return l.QEMUDomainMonitorCommand(dom, cmd, 0)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	ret, err := parseQMPReply([]byte(reply))
	if err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	if result != nil && len(ret) > 0 {
		if err := json.Unmarshal(ret, result); err != nil {
			return fmt.Errorf("%s: decode: %w", command, err)
		}
	}
	return nil
}

// Subscribe subscribes to the domain's QMP events.
func (mon monitor) Subscribe(ctx context.Context) (qemuvm.Events, error) {
	m := mon.m
	l, err := m.drv.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	// The subscription lives until Close, not until ctx: a caller may
	// abandon the wait, but the stream must still be shut down.
	sctx, cancel := context.WithCancel(context.Background())
	name := m.record().Domain
	events, err := call(ctx, m.drv.conn, func(*golibvirt.Libvirt) (<-chan golibvirt.DomainEvent, error) {
		return l.SubscribeQEMUEvents(sctx, name)
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return &qmpEvents{m: m, events: events, cancel: cancel}, nil
}

// qmpEvents is one subscription to a domain's QMP events.
type qmpEvents struct {
	m      *Machine
	events <-chan golibvirt.DomainEvent
	cancel context.CancelFunc
}

// Wait returns the data of the next event named name. It fails when the
// domain ends or the connection to libvirtd is lost first.
func (e *qmpEvents) Wait(ctx context.Context, name string) (json.RawMessage, error) {
	for {
		select {
		case ev, ok := <-e.events:
			if !ok {
				return nil, fmt.Errorf("%w: the connection to libvirtd was lost", desktop.ErrUnavailable)
			}
			if ev.Event == name {
				return ev.Details, nil
			}
		case <-e.m.exited:
			return nil, fmt.Errorf("QEMU ended: it %s", e.m.ExitReason())
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no %s event: %w", desktop.ErrUnavailable, name, ctx.Err())
		}
	}
}

// Close ends the subscription. go-libvirt's stream blocks on sending an
// event nobody reads, so the channel is drained until it closes.
func (e *qmpEvents) Close() {
	e.cancel()
	go func() {
		for range e.events {
		}
	}()
}

func encodeQMP(command string, args any) (string, error) {
	b, err := json.Marshal(struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{command, args})
	if err != nil {
		return "", fmt.Errorf("%s: encode: %w", command, err)
	}
	return string(b), nil
}

// parseQMPReply reads what libvirt hands back from QEMU: a return value
// ({"return": ...}) or an error ({"error": {"class", "desc"}}).
func parseQMPReply(b []byte) (json.RawMessage, error) {
	var r struct {
		Return json.RawMessage `json:"return"`
		Error  *QMPError       `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil {
		return nil, fmt.Errorf("malformed reply %.80q: %w", b, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if r.Return == nil {
		return nil, errors.New("reply has neither return nor error")
	}
	return r.Return, nil
}
