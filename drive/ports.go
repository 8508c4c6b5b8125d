package drive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/warmdesk/warmdesk/desktop"
)

// GuestDialer reaches TCP ports inside guests (hostd's egress networks).
type GuestDialer interface {
	DialGuest(ctx context.Context, id string, port uint16) (net.Conn, error)
}

// ErrNothingListens is a guest port whose guest answered the connection
// with a reset: no server listens there on the guest's network address.
var ErrNothingListens = errors.New("the guest refused the connection")

// DialPort connects to a TCP port inside a running desktop's guest, for
// the port proxy: a dev server an agent started is reachable from outside
// without the guest reaching out.
func (s *Service) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	if port < 1 || port > 65535 {
		return nil, fieldError("port", "port %d: use 1 to 65535", port)
	}
	if s.cfg.Guests == nil {
		return nil, fmt.Errorf("%w: this hostd has no guest networks", desktop.ErrUnavailable)
	}
	if _, _, err := s.runningMachine(ctx, id, desktop.WaitNone, "reach a port of"); err != nil {
		return nil, err
	}
	c, err := s.cfg.Guests.DialGuest(ctx, id, uint16(port))
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// The connection comes from the gateway to the guest's address, so
		// a server bound to the guest's 127.0.0.1 refuses it too.
		return nil, fmt.Errorf("desktop %s: nothing listens on port %d in the guest (a server must listen on 0.0.0.0, not only on the guest's 127.0.0.1): %w", id, port, ErrNothingListens)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, fmt.Errorf("%w: desktop %s: port %d in the guest did not answer: %w", desktop.ErrUnavailable, id, port, err)
	case err != nil:
		return nil, fmt.Errorf("desktop %s: %w", id, err)
	}
	return c, nil
}
