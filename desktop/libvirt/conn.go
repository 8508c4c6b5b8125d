package libvirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/warmdesk/warmdesk/desktop"
)

// DefaultURI is the libvirtd the driver connects to unless told otherwise.
const DefaultURI = "qemu:///system"

// dialTimeout bounds one connection attempt to libvirtd's socket.
const dialTimeout = 5 * time.Second

// Reconnect attempts after libvirtd went away are spaced from
// reconnectFirst doubling to reconnectMax: libvirtd gives no signal when
// it is back, so trying again is the only way to notice.
const (
	reconnectFirst = 50 * time.Millisecond
	reconnectMax   = 2 * time.Second
)

// conn holds one connection to libvirtd at a time and replaces it when
// libvirtd restarts. Machines never keep a connection: each call takes the
// current one, and no domain is created with the autodestroy flag, so a
// desktop outlives every connection (and hostd itself).
type conn struct {
	uri    *url.URL
	socket string
	log    *slog.Logger
	// onUp runs after every (re)connection, before calls are let through:
	// the driver subscribes to events and finds out what changed while it
	// was away.
	onUp func(ctx context.Context, l *golibvirt.Libvirt) error

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	l  *golibvirt.Libvirt // nil while disconnected
	// up is closed while a connection is usable and replaced by an open
	// channel when it is lost, so callers can wait for the next one.
	up      chan struct{}
	lastErr error
}

// parseURI checks that a libvirt URI names a local QEMU libvirtd reached
// over its unix socket, and returns that socket's path. The driver shares
// files and sockets with the QEMU processes libvirtd starts (the snapshot's
// memory file, the migration and VNC sockets), so libvirtd must run on this
// host.
func parseURI(raw string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%w: libvirt URI %q: %w", desktop.ErrInvalid, raw, err)
	}
	switch u.Scheme {
	case "qemu", "qemu+unix":
	default:
		return nil, "", fmt.Errorf("%w: libvirt URI %q: use qemu:///system (or qemu+unix:///system?socket=PATH): the driver needs a local QEMU libvirtd", desktop.ErrInvalid, raw)
	}
	if u.Host != "" {
		return nil, "", fmt.Errorf("%w: libvirt URI %q names host %q: the libvirt driver shares files with QEMU, so libvirtd must run on this host", desktop.ErrInvalid, raw, u.Host)
	}
	if s := u.Query().Get("socket"); s != "" {
		return u, s, nil
	}
	switch u.Path {
	case "/system":
		return u, "/var/run/libvirt/libvirt-sock", nil
	case "/session":
		dir := os.Getenv("XDG_RUNTIME_DIR")
		if dir == "" {
			return nil, "", fmt.Errorf("%w: libvirt URI %q: XDG_RUNTIME_DIR is not set, so the session socket is unknown: add ?socket=PATH", desktop.ErrInvalid, raw)
		}
		return u, filepath.Join(dir, "libvirt", "libvirt-sock"), nil
	}
	return nil, "", fmt.Errorf("%w: libvirt URI %q: use qemu:///system or qemu:///session", desktop.ErrInvalid, raw)
}

// dial opens one connection.
func (c *conn) dial() (*golibvirt.Libvirt, error) {
	l := golibvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(c.socket), dialers.WithLocalTimeout(dialTimeout)))
	if err := l.ConnectToURI(golibvirt.RemoteURI(c.uri)); err != nil {
		return nil, err
	}
	return l, nil
}

// explainDial turns a failed first connection into one error that says
// what to install or start.
func explainDial(uri, socket string, err error) error {
	if _, lerr := exec.LookPath("libvirtd"); lerr != nil {
		if _, serr := os.Stat(socket); serr != nil {
			return fmt.Errorf("%w: libvirtd is not installed: install it (apt-get install --no-install-recommends libvirt-daemon-system libvirt-clients, or scripts/libvirtd) and start it (virtlogd -d; libvirtd -d): %w",
				desktop.ErrUnavailable, err)
		}
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: libvirtd is not running (nothing answers on %s for %s): start it as root (virtlogd -d; libvirtd -d, or scripts/libvirtd): %w",
			desktop.ErrUnavailable, socket, uri, err)
	}
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%w: libvirtd's socket %s refuses this user: run hostd as root or as a member of the libvirt group: %w", desktop.ErrUnavailable, socket, err)
	}
	return fmt.Errorf("%w: connect to libvirtd at %s: %w", desktop.ErrUnavailable, uri, err)
}

// connect makes the first connection (failing at once, with an explaining
// error, when libvirtd is absent) and then keeps one.
func connect(ctx context.Context, raw string, log *slog.Logger, onUp func(context.Context, *golibvirt.Libvirt) error) (*conn, error) {
	u, socket, err := parseURI(raw)
	if err != nil {
		return nil, err
	}
	c := &conn{uri: u, socket: socket, log: log, onUp: onUp, up: make(chan struct{}), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l, err := c.dial()
	if err != nil {
		c.cancel()
		return nil, explainDial(raw, socket, err)
	}
	if err := onUp(c.ctx, l); err != nil {
		l.Disconnect()
		c.cancel()
		return nil, fmt.Errorf("libvirtd at %s: %w", raw, err)
	}
	c.setUp(l)
	go c.run(l)
	return c, nil
}

func (c *conn) setUp(l *golibvirt.Libvirt) {
	c.mu.Lock()
	c.l, c.lastErr = l, nil
	close(c.up)
	c.mu.Unlock()
}

func (c *conn) setDown(err error) {
	c.mu.Lock()
	c.l, c.lastErr = nil, err
	c.up = make(chan struct{})
	c.mu.Unlock()
}

// run waits for the connection to drop and makes a new one, for as long
// as the driver is open.
func (c *conn) run(l *golibvirt.Libvirt) {
	defer close(c.done)
	for {
		select {
		case <-l.Disconnected():
		case <-c.ctx.Done():
			l.Disconnect()
			return
		}
		c.log.Warn("connection to libvirtd lost; reconnecting", "uri", c.uri.String())
		c.setDown(errors.New("the connection to libvirtd was lost"))
		wait := reconnectFirst
		for {
			t := time.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			next, err := c.dial()
			if err == nil {
				if err = c.onUp(c.ctx, next); err == nil {
					l = next
					break
				}
				next.Disconnect()
			}
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			wait = min(2*wait, reconnectMax)
		}
		c.log.Info("reconnected to libvirtd", "uri", c.uri.String())
		c.setUp(l)
	}
}

// get returns the current connection, waiting for a reconnection until ctx
// ends.
func (c *conn) get(ctx context.Context) (*golibvirt.Libvirt, error) {
	for {
		c.mu.Lock()
		l, up, last := c.l, c.up, c.lastErr
		c.mu.Unlock()
		if l != nil && l.IsConnected() {
			return l, nil
		}
		select {
		case <-up:
		case <-c.ctx.Done():
			return nil, fmt.Errorf("%w: the libvirt driver is closed", desktop.ErrUnavailable)
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return nil, fmt.Errorf("%w: libvirtd at %s is not reachable: %w", desktop.ErrUnavailable, c.uri, last)
		}
	}
}

// close ends the connection; domains keep running.
func (c *conn) close() {
	c.cancel()
	<-c.done
}

// call runs one libvirt RPC on the current connection, returning early
// when ctx ends (go-libvirt's calls take no context; an abandoned call's
// answer is dropped when it comes).
func call[T any](ctx context.Context, c *conn, fn func(*golibvirt.Libvirt) (T, error)) (T, error) {
	var zero T
	l, err := c.get(ctx)
	if err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := fn(l)
		res <- result{v, err}
	}()
	select {
	case r := <-res:
		return r.v, classify(r.err)
	case <-ctx.Done():
		return zero, fmt.Errorf("%w: libvirtd did not answer: %w", desktop.ErrUnavailable, ctx.Err())
	}
}

// do is call for RPCs without a result.
func do(ctx context.Context, c *conn, fn func(*golibvirt.Libvirt) error) error {
	_, err := call(ctx, c, func(l *golibvirt.Libvirt) (struct{}, error) { return struct{}{}, fn(l) })
	return err
}

// classify gives libvirt's errors the desktop sentinels that fit them.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var le golibvirt.Error
	if errors.As(err, &le) {
		switch golibvirt.ErrorNumber(le.Code) {
		case golibvirt.ErrNoDomain:
			return fmt.Errorf("%w: %w", desktop.ErrNotFound, err)
		case golibvirt.ErrAgentUnresponsive, golibvirt.ErrOperationTimeout:
			return fmt.Errorf("%w: %w", desktop.ErrUnavailable, err)
		case golibvirt.ErrOperationInvalid:
			return fmt.Errorf("%w: %w", desktop.ErrConflict, err)
		}
		return err
	}
	// Anything else comes from the connection itself (closed, reset).
	return fmt.Errorf("%w: libvirtd connection: %w", desktop.ErrUnavailable, err)
}

// libvirtCode is the libvirt error number inside err, or 0.
func libvirtCode(err error) golibvirt.ErrorNumber {
	var le golibvirt.Error
	if errors.As(err, &le) {
		return golibvirt.ErrorNumber(le.Code)
	}
	return 0
}
