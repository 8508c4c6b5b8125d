package vnc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
)

// TCPListener serves one desktop to ordinary VNC clients (vncsnapshot,
// vncviewer) on a loopback TCP port. It terminates their security handshake
// with its own VNC password, so that other users of the host, who can reach
// any loopback port, cannot watch or drive the desktop; VNC Authentication
// is weak (DES, 8 characters), which is why only loopback addresses are
// allowed.
type TCPListener struct {
	ln       net.Listener
	password string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// maxTCPViewers bounds one listener's concurrent sessions.
const maxTCPViewers = 32

// ListenTCP listens on addr, a loopback address such as "127.0.0.1:0", and
// relays each connection to a new connection to the desktop from dial, as
// ServeConn does, until ctx is done or Close. When opts.ViewerPassword is
// empty it makes up a random 8-character one; Password returns it.
func ListenTCP(ctx context.Context, addr string, dial Dialer, opts ProxyOptions) (*TCPListener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("vnc listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("vnc listen address %q is not loopback", addr)
	}
	if opts.ViewerPassword == "" {
		opts.ViewerPassword = rand.Text()[:8]
	}
	opts = opts.withDefaults()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("vnc listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &TCPListener{ln: ln, password: opts.ViewerPassword, cancel: cancel}
	context.AfterFunc(ctx, func() { ln.Close() })
	l.wg.Go(func() { l.accept(ctx, dial, opts) })
	return l, nil
}

func (l *TCPListener) accept(ctx context.Context, dial Dialer, opts ProxyOptions) {
	slots := make(chan struct{}, maxTCPViewers)
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				opts.Logger.Warn("vnc tcp listener stopped", "err", err)
			}
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			opts.Logger.Warn("vnc tcp viewer refused: too many viewers", "remote", conn.RemoteAddr())
			conn.Close()
			continue
		}
		l.wg.Go(func() {
			defer func() { <-slots }()
			if err := ServeConn(ctx, conn, dial, opts); err != nil && ctx.Err() == nil {
				opts.Logger.Info("vnc tcp viewer ended", "remote", conn.RemoteAddr(), "err", err)
			}
		})
	}
}

// Addr returns the listening address.
func (l *TCPListener) Addr() net.Addr { return l.ln.Addr() }

// Password returns the VNC password viewers must give.
func (l *TCPListener) Password() string { return l.password }

// Close stops listening, ends every session and waits for them.
func (l *TCPListener) Close() error {
	l.cancel()
	err := l.ln.Close()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
