// Package qmp is a small client for the QEMU Machine Protocol: commands with
// ids (several may be in flight), events to subscribers, and file
// descriptors passed with SCM_RIGHTS (getfd), which the fast restore needs
// and go-qemu's monitor cannot do.
package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// maxMessage bounds one QMP message; QEMU's answers to the commands we use
// are a few kilobytes.
const maxMessage = 8 << 20

// Error is an error QEMU returned for a command.
type Error struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *Error) Error() string { return e.Class + ": " + e.Desc }

// Event is an asynchronous QMP event.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
	// Time is QEMU's timestamp of the event.
	Time time.Time `json:"-"`
}

// Version is QEMU's version from the greeting.
type Version struct {
	Major, Minor, Micro int
	Package             string
}

func (v Version) String() string {
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Micro)
}

// ErrClosed is returned for commands on a connection that has ended.
var ErrClosed = errors.New("qmp: connection closed")

// Client is one QMP connection. Its methods are safe for concurrent use.
type Client struct {
	conn    *net.UnixConn
	version Version

	writeMu sync.Mutex
	nextID  uint64

	mu      sync.Mutex
	pending map[uint64]chan reply
	subs    map[*Subscription]struct{}
	err     error
	done    chan struct{}
}

type reply struct {
	ret json.RawMessage
	err error
}

// Dial connects to a QMP unix socket and negotiates capabilities.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: dial %s: %w", path, err)
	}
	c, err := New(ctx, conn.(*net.UnixConn))
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// New runs the QMP handshake on an open connection: it waits for the
// greeting (QEMU sends it once its main loop runs), then leaves capability
// negotiation mode.
func New(ctx context.Context, conn *net.UnixConn) (*Client, error) {
	c := &Client{
		conn:    conn,
		pending: map[uint64]chan reply{},
		subs:    map[*Subscription]struct{}{},
		done:    make(chan struct{}),
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	greeting := make(chan error, 1)
	go func() {
		line, err := readLine(r)
		if err == nil {
			var msg message
			msg, err = parseMessage(line)
			if err == nil && msg.QMP == nil {
				err = fmt.Errorf("qmp: expected a greeting, got %.80q", line)
			}
			if err == nil {
				c.version = msg.QMP.Version.QEMU.toVersion(msg.QMP.Version.Package)
			}
		}
		greeting <- err
	}()
	select {
	case err := <-greeting:
		if err != nil {
			return nil, fmt.Errorf("qmp: greeting: %w", err)
		}
	case <-ctx.Done():
		conn.Close()
		<-greeting
		return nil, fmt.Errorf("qmp: waiting for the greeting: %w", ctx.Err())
	}
	go c.readLoop(r)
	if err := c.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Version is the QEMU version from the greeting.
func (c *Client) Version() Version { return c.version }

// Done is closed when the connection ends (for example because QEMU exited).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, once Done is closed.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// Execute runs one command and decodes its return value into result (which
// may be nil).
func (c *Client) Execute(ctx context.Context, command string, args, result any) error {
	return c.execute(ctx, command, args, result, -1)
}

// ExecuteWithFD runs one command with a file descriptor attached
// (SCM_RIGHTS), as getfd and add-fd need.
func (c *Client) ExecuteWithFD(ctx context.Context, command string, args any, fd int, result any) error {
	return c.execute(ctx, command, args, result, fd)
}

// SendFD hands QEMU a file descriptor under a name, for URIs like fd:NAME.
func (c *Client) SendFD(ctx context.Context, name string, fd int) error {
	return c.ExecuteWithFD(ctx, "getfd", map[string]string{"fdname": name}, fd, nil)
}

func (c *Client) execute(ctx context.Context, command string, args, result any, fd int) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan reply, 1)
	c.pending[id] = ch
	c.mu.Unlock()

	payload, err := encodeCommand(command, args, id)
	if err != nil {
		c.forget(id)
		return err
	}
	if err := c.write(payload, fd); err != nil {
		c.forget(id)
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("qmp %s: %w", command, r.err)
		}
		if result != nil && len(r.ret) > 0 {
			if err := json.Unmarshal(r.ret, result); err != nil {
				return fmt.Errorf("qmp %s: decode return: %w", command, err)
			}
		}
		return nil
	case <-ctx.Done():
		// The reply, when it comes, finds no waiter and is dropped.
		c.forget(id)
		return fmt.Errorf("qmp %s: %w", command, ctx.Err())
	}
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) write(payload []byte, fd int) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if fd < 0 {
		_, err := c.conn.Write(payload)
		return err
	}
	n, oobn, err := c.conn.WriteMsgUnix(payload, syscall.UnixRights(fd), nil)
	if err != nil {
		return err
	}
	if oobn == 0 {
		return errors.New("file descriptor not sent")
	}
	if n < len(payload) {
		_, err = c.conn.Write(payload[n:])
	}
	return err
}

func (c *Client) readLoop(r *bufio.Reader) {
	var err error
	for {
		var line []byte
		line, err = readLine(r)
		if err != nil {
			break
		}
		msg, perr := parseMessage(line)
		if perr != nil {
			err = perr
			break
		}
		c.dispatch(msg)
	}
	c.conn.Close()
	c.mu.Lock()
	if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		c.err = ErrClosed
	} else {
		c.err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	for id, ch := range c.pending {
		ch <- reply{err: c.err}
		delete(c.pending, id)
	}
	for s := range c.subs {
		s.closeLocked()
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) dispatch(msg message) {
	switch {
	case msg.Event != "":
		ev := Event{Name: msg.Event, Data: msg.Data}
		if msg.Timestamp != nil {
			ev.Time = time.Unix(msg.Timestamp.Seconds, msg.Timestamp.Microseconds*1000)
		}
		c.mu.Lock()
		for s := range c.subs {
			s.deliver(ev)
		}
		c.mu.Unlock()
	case msg.ID != nil:
		c.mu.Lock()
		ch, ok := c.pending[*msg.ID]
		delete(c.pending, *msg.ID)
		c.mu.Unlock()
		if !ok {
			return
		}
		if msg.Error != nil {
			ch <- reply{err: msg.Error}
		} else {
			ch <- reply{ret: msg.Return}
		}
	}
}

// Subscription receives events from the moment it is made. Subscribe before
// sending the command that causes the event you wait for.
type Subscription struct {
	c      *Client
	ch     chan Event
	closed bool
}

// subscriptionBuffer bounds the events a subscriber may fall behind by; the
// oldest are dropped beyond it (a subscriber waits for one event at a time).
const subscriptionBuffer = 64

// Subscribe starts receiving events.
func (c *Client) Subscribe() *Subscription {
	s := &Subscription{c: c, ch: make(chan Event, subscriptionBuffer)}
	c.mu.Lock()
	if c.err != nil {
		s.closed = true
		close(s.ch)
	} else {
		c.subs[s] = struct{}{}
	}
	c.mu.Unlock()
	return s
}

func (s *Subscription) deliver(ev Event) {
	for {
		select {
		case s.ch <- ev:
			return
		default:
			select {
			case <-s.ch:
			default:
			}
		}
	}
}

func (s *Subscription) closeLocked() {
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	delete(s.c.subs, s)
}

// Close stops the subscription.
func (s *Subscription) Close() {
	s.c.mu.Lock()
	s.closeLocked()
	s.c.mu.Unlock()
}

// Wait returns the first event named name for which match (may be nil)
// returns true.
func (s *Subscription) Wait(ctx context.Context, name string, match func(Event) bool) (Event, error) {
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return Event{}, fmt.Errorf("waiting for %s: %w", name, ErrClosed)
			}
			if ev.Name == name && (match == nil || match(ev)) {
				return ev, nil
			}
		case <-ctx.Done():
			return Event{}, fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		}
	}
}
