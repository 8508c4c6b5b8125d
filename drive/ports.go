package drive

import (
	"context"
	"fmt"
	"net"

	"github.com/warmdesk/warmdesk/desktop"
)

// GuestDialer reaches TCP ports inside guests (hostd's egress networks).
type GuestDialer interface {
	DialGuest(ctx context.Context, id string, port uint16) (net.Conn, error)
}

// DialPort connects to a TCP port inside a running desktop's guest, for
// the port proxy: a dev server an agent started is reachable from outside
// without the guest reaching out.
func (s *Service) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fieldError("port", "port %d: use 1 to 65535", port)
	}
	if s.cfg.Guests == nil {
		return nil, fmt.Errorf("%w: this hostd has no guest networks", desktop.ErrUnavailable)
	}
	if _, _, err := s.runningMachine(ctx, id, false, "reach a port of"); err != nil {
		return nil, err
	}
	c, err := s.cfg.Guests.DialGuest(ctx, id, uint16(port))
	if err != nil {
		return nil, fmt.Errorf("desktop %s: %w", id, err)
	}
	s.mgr.Touch(id)
	return c, nil
}
