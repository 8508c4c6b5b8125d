package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// QMPError is an error QEMU returned to a command sent through libvirt.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return "qemu: " + e.Class + ": " + e.Desc }

// qmp sends one QMP command to the domain's QEMU through libvirt's
// monitor passthrough (QEMUDomainMonitorCommand), with the same JSON the
// QEMU driver sends on its own socket.
func (m *Machine) qmp(ctx context.Context, command string, args, result any) error {
	cmd, err := encodeQMP(command, args)
	if err != nil {
		return err
	}
	dom := m.domain()
	reply, err := call(ctx, m.drv.conn, func(l *golibvirt.Libvirt) (string, error) {
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
