package vnc

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Dialer opens a new connection to a desktop's VNC server, typically its
// QEMU unix socket.
type Dialer func(ctx context.Context) (net.Conn, error)

// MirrorOptions configures NewMirror.
type MirrorOptions struct {
	Dial Dialer
	// Password for QEMU's VNC Authentication (password=on); empty for None.
	Password string
	Logger   *slog.Logger
	Limits   Limits
	// HandshakeTimeout bounds dialing plus the RFB handshake (default 10 s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each write to the server (default 5 s).
	WriteTimeout time.Duration
	// MaxBackoff caps the wait between reconnection attempts (default 1 s).
	// Reconnect cuts the wait short.
	MaxBackoff time.Duration
}

const (
	defaultHandshakeTimeout = 10 * time.Second
	defaultMaxBackoff       = time.Second
	minBackoff              = 20 * time.Millisecond
	// pokeInterval rate-limits Poke: QEMU's fastest refresh is 30 ms.
	pokeInterval = 10 * time.Millisecond
)

// Mirror keeps an always-current copy of one desktop's framebuffer, with a
// change counter and the damaged rectangles of each change. Run connects
// and keeps it current; every other method is safe for concurrent use and
// never blocks on the network except the Send methods.
//
// The counter starts at 0 with an empty frame, becomes 1 when the first
// complete frame is held (Ready is closed then), and increases by one for
// each FramebufferUpdate that changed at least one pixel. The picture
// survives reconnections: a new connection's first complete frame replaces
// it only where it differs.
type Mirror struct {
	opts       MirrorOptions
	log        *slog.Logger
	epoch      time.Time
	minBackoff time.Duration

	mu        sync.Mutex
	front     *image.RGBA // written only by Run's goroutine, under mu
	counter   uint64
	changed   chan struct{}
	damage    damageLog
	cursor    *image.RGBA
	hotspot   image.Point
	hasCursor bool
	client    *Client
	offered   *Painted // taken by the next session
	// cancelDial cuts short a dial and handshake in progress, for an
	// offer.
	cancelDial context.CancelFunc

	ready     chan struct{}
	readyOnce sync.Once
	connected atomic.Bool
	running   atomic.Bool
	reconnect chan struct{}
	poke      chan struct{}
	lastPoke  atomic.Int64 // nanoseconds since epoch

	// Scratch for publishing, used by Run's goroutine only.
	bands []image.Rectangle
	rects []image.Rectangle
}

// NewMirror returns a Mirror that does nothing until Run.
func NewMirror(opts MirrorOptions) *Mirror {
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{
		opts:       opts,
		log:        log,
		epoch:      time.Now(),
		minBackoff: minBackoff,
		changed:    make(chan struct{}),
		ready:      make(chan struct{}),
		reconnect:  make(chan struct{}, 1),
		poke:       make(chan struct{}, 1),
	}
	m.lastPoke.Store(-int64(pokeInterval))
	return m
}

func (o MirrorOptions) withDefaults() MirrorOptions {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultHandshakeTimeout
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	o.Limits = o.Limits.withDefaults()
	return o
}

// Run connects to the server and mirrors its framebuffer until ctx is done,
// reconnecting with backoff whenever the connection drops or cannot be made.
// It returns ctx's error. Only one Run may be active at a time.
func (m *Mirror) Run(ctx context.Context) error {
	if m.opts.Dial == nil {
		return errors.New("vnc mirror: no dialer")
	}
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("vnc mirror: already running")
	}
	defer m.running.Store(false)
	defer func() {
		// An offer no session took is nobody's to close but ours.
		if p := m.takeOffered(); p != nil {
			p.Close()
		}
	}()

	backoff := m.minBackoff
	failures := 0
	for {
		healthy, err := m.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if healthy {
			backoff, failures = m.minBackoff, 0
		}
		failures++
		level := slog.LevelInfo
		if failures > 1 {
			level = slog.LevelDebug // a hibernated desktop fails every second
		}
		if m.hasOffer() {
			continue // a painted connection waits: no backoff
		}
		m.log.Log(ctx, level, "vnc mirror disconnected", "err", err, "retry_in", backoff)

		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-m.reconnect:
			timer.Stop()
		case <-timer.C:
		}
		backoff = max(min(2*backoff, m.opts.MaxBackoff), m.minBackoff)
	}
}

// Reconnect hints that the desktop's VNC socket has come back (for example a
// woken desktop with a new QEMU process): a disconnected mirror dials at
// once instead of waiting out its backoff. A live connection is kept.
func (m *Mirror) Reconnect() {
	select {
	case m.reconnect <- struct{}{}:
	default:
	}
}

// session runs one connection. healthy reports whether it got as far as a
// complete frame, which resets the backoff.
func (m *Mirror) session(ctx context.Context) (healthy bool, err error) {
	c, painted := (*Client)(nil), m.takeOffered()
	if painted != nil {
		c = painted.c
		// The offer's own Reconnect hint is spent: a later drop waits
		// out its backoff as usual.
		select {
		case <-m.reconnect:
		default:
		}
	} else {
		hctx, cancel := context.WithTimeout(ctx, m.opts.HandshakeTimeout)
		m.mu.Lock()
		m.cancelDial = cancel
		m.mu.Unlock()
		c, err = connect(hctx, m.opts)
		m.mu.Lock()
		m.cancelDial = nil
		m.mu.Unlock()
		cancel()
		if err != nil {
			return false, err
		}
	}
	defer c.Close()
	si := c.ServerInit()
	m.log.Info("vnc mirror connected", "width", si.Width, "height", si.Height, "name", si.Name, "painted_ahead", painted != nil)

	sctx, scancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		scancel()
		c.Close()
		wg.Wait()
		m.detach(c)
	}()
	if !m.attach(c) {
		return false, errors.New("a painted connection was offered")
	}
	wg.Go(func() { m.pokeLoop(sctx, c) })

	st := &sessionState{client: c, cov: newCoverage(c.Framebuffer().Rect.Size())}
	if painted != nil {
		// Its whole screen came already: publish it, then ask for what
		// changed since.
		st.cov, st.healthy = nil, true
		img, hot, ok := c.Cursor()
		m.publishFull(c.Framebuffer(), img, hot, ok)
	}
	if err := c.RequestUpdate(sctx, painted != nil, c.Framebuffer().Rect.Size()); err != nil {
		return st.healthy, err
	}
	if painted != nil && c.ExtendedKeyEvents() {
		// Unread while it waited, the connection let QEMU's refresh
		// timer slow down to seconds: poke, so what changed since the
		// painting comes at once.
		if err := c.SendQEMUKey(sctx, false, 0, 0); err != nil {
			return st.healthy, err
		}
	}
	for {
		msg, err := c.ReadMessage(sctx)
		if err != nil {
			return st.healthy, fmt.Errorf("read from vnc server: %w", err)
		}
		u, ok := msg.(*FramebufferUpdate)
		if !ok {
			m.log.Debug("vnc mirror ignored a server message", "type", fmt.Sprintf("%T", msg))
			continue
		}
		m.apply(st, u)
		if u.ExtendedKeyEvents && st.cov != nil {
			// QEMU now takes our no-op key release, and the first full
			// frame is still to come: poke, so QEMU's refresh timer, which
			// may have slowed down before our request arrived, fires at
			// once instead of up to a back-off interval later.
			if err := c.SendQEMUKey(sctx, false, 0, 0); err != nil {
				return st.healthy, err
			}
		}
		// Keep one request outstanding so that updates stream; after a
		// resize ask for everything, which a server need not send unasked.
		// Asking after publishing costs nothing (QEMU refreshes on a timer
		// of at least 30 ms) and means a request seen is an update applied.
		if err := c.RequestUpdate(sctx, !u.Resized, c.Framebuffer().Rect.Size()); err != nil {
			return st.healthy, err
		}
	}
}

// sessionState is what one connection's reader knows.
type sessionState struct {
	client *Client
	// cov tracks painting of a new connection or size; nil once complete.
	cov *coverage
	// healthy is set once a complete frame arrived, which resets backoff.
	healthy bool
}

// apply publishes one update. Until a new connection (or size) is fully
// painted, the mirror keeps showing the previous picture rather than a
// partial one.
func (m *Mirror) apply(st *sessionState, u *FramebufferUpdate) {
	c := st.client
	fb := c.Framebuffer()
	if u.Resized {
		st.cov = newCoverage(fb.Rect.Size())
	}
	if st.cov != nil {
		for _, r := range u.Damage {
			st.cov.mark(r)
		}
		if !st.cov.complete() {
			return
		}
		st.cov = nil
		st.healthy = true
		img, hot, ok := c.Cursor()
		m.publishFull(fb, img, hot, ok)
		return
	}
	if u.CursorChanged {
		img, hot, ok := c.Cursor()
		m.setCursor(img, hot, ok)
	}
	if len(u.Damage) > 0 {
		m.publish(fb, u.Damage)
	}
}

// attach makes c the current connection, unless a painted one was offered
// meanwhile (then the session ends and Run takes the offer).
func (m *Mirror) attach(c *Client) bool {
	m.mu.Lock()
	if m.offered != nil {
		m.mu.Unlock()
		return false
	}
	m.client = c
	m.mu.Unlock()
	m.connected.Store(true)
	return true
}

// connect dials and handshakes.
func connect(ctx context.Context, opts MirrorOptions) (*Client, error) {
	conn, err := dialRetry(ctx, opts.Dial)
	if err != nil {
		return nil, fmt.Errorf("dial vnc server: %w", err)
	}
	return NewClient(ctx, conn, ClientOptions{
		Password:     opts.Password,
		Limits:       opts.Limits,
		WriteTimeout: opts.WriteTimeout,
	})
}

func (m *Mirror) detach(c *Client) {
	m.mu.Lock()
	if m.client == c {
		m.client = nil
	}
	m.mu.Unlock()
	m.connected.Store(false)
}
