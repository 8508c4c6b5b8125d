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
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = defaultHandshakeTimeout
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = defaultMaxBackoff
	}
	opts.Limits = opts.Limits.withDefaults()
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
	hctx, cancel := context.WithTimeout(ctx, m.opts.HandshakeTimeout)
	conn, err := m.opts.Dial(hctx)
	if err != nil {
		cancel()
		return false, fmt.Errorf("dial vnc server: %w", err)
	}
	c, err := NewClient(hctx, conn, ClientOptions{
		Password:     m.opts.Password,
		Limits:       m.opts.Limits,
		WriteTimeout: m.opts.WriteTimeout,
	})
	cancel()
	if err != nil {
		return false, err
	}
	defer c.Close()
	init := c.ServerInit()
	m.log.Info("vnc mirror connected", "width", init.Width, "height", init.Height, "name", init.Name)

	sctx, scancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		scancel()
		c.Close()
		wg.Wait()
		m.detach(c)
	}()
	m.attach(c)
	wg.Go(func() { m.pokeLoop(sctx, c) })

	st := &sessionState{client: c, cov: newCoverage(c.Framebuffer().Rect.Size())}
	if err := c.RequestUpdate(sctx, false, c.Framebuffer().Rect.Size()); err != nil {
		return false, err
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

func (m *Mirror) attach(c *Client) {
	m.mu.Lock()
	m.client = c
	m.mu.Unlock()
	m.connected.Store(true)
}

func (m *Mirror) detach(c *Client) {
	m.mu.Lock()
	if m.client == c {
		m.client = nil
	}
	m.mu.Unlock()
	m.connected.Store(false)
}

// Poke asks QEMU to look for changes now. QEMU's VNC refresh interval grows
// from 30 ms to 3 s while the screen is idle, and any client message of type
// greater than 3 resets it (ui/vnc.c, protocol_client_msg). Poke sends QEMU's
// extended key event releasing keycode 0, a key that is never down, which
// QEMU's keyboard state drops before the guest sees it (ui/kbd-state.c). It
// never blocks, and sends at most one message per 10 ms however often it is
// called.
func (m *Mirror) Poke() {
	now := int64(time.Since(m.epoch))
	last := m.lastPoke.Load()
	if now-last < int64(pokeInterval) || !m.lastPoke.CompareAndSwap(last, now) {
		return
	}
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

func (m *Mirror) pokeLoop(ctx context.Context, c *Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.poke:
			if !c.ExtendedKeyEvents() {
				continue // not QEMU, or not yet acknowledged: nothing to poke
			}
			if err := c.SendQEMUKey(ctx, false, 0, 0); err != nil {
				m.log.Debug("vnc mirror poke failed", "err", err)
				return
			}
		}
	}
}

// Frame copies the current framebuffer into dst, reallocating it when dst
// is nil or of another size, and returns it with the change counter of the
// copy. Before the first complete frame it returns an empty image and 0.
func (m *Mirror) Frame(dst *image.RGBA) (*image.RGBA, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.front
	if src == nil {
		if dst == nil || !dst.Rect.Empty() {
			dst = &image.RGBA{}
		}
		return dst, m.counter
	}
	if dst == nil || dst.Rect.Size() != src.Rect.Size() {
		dst = image.NewRGBA(src.Rect)
	}
	copyImage(dst, src)
	return dst, m.counter
}

// Changed returns the current change counter and a channel closed at the
// next change after it.
func (m *Mirror) Changed() (uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counter, m.changed
}

// Damage returns the rectangles that changed after counter since, up to the
// current counter (nil and true when since is current). ok is false when
// that history is gone or the size changed in between: redraw everything.
func (m *Mirror) Damage(since uint64) (rects []image.Rectangle, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.damage.since(since, m.counter)
}

// Cursor returns the pointer image (not to be modified) and its hotspot when
// the server sent one with the Cursor pseudo-encoding; ok is false
// otherwise, and then the guest draws its pointer into the framebuffer.
func (m *Mirror) Cursor() (img *image.RGBA, hotspot image.Point, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor, m.hotspot, m.hasCursor
}

// Ready is closed when the first complete frame is held.
func (m *Mirror) Ready() <-chan struct{} { return m.ready }

// Size returns the size of the held frame; zero before Ready.
func (m *Mirror) Size() image.Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.front == nil {
		return image.Point{}
	}
	return m.front.Rect.Size()
}

// Connected reports whether a connection to the server is up.
func (m *Mirror) Connected() bool { return m.connected.Load() }

func (m *Mirror) currentClient() (*Client, error) {
	m.mu.Lock()
	c := m.client
	m.mu.Unlock()
	if c == nil {
		return nil, ErrNotConnected
	}
	return c, nil
}

// SendPointer sends a PointerEvent: button mask (bit 0 left, 1 middle,
// 2 right, 3/4 wheel up/down) and position in framebuffer pixels.
func (m *Mirror) SendPointer(ctx context.Context, buttons uint8, x, y int) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendPointer(ctx, buttons, x, y)
}

// SendKey sends a KeyEvent for an X keysym, mapped by QEMU's keymap.
func (m *Mirror) SendKey(ctx context.Context, down bool, keysym uint32) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendKey(ctx, down, keysym)
}

// SendQEMUKey sends QEMU's extended key event with an XT keycode, which
// bypasses keymaps.
func (m *Mirror) SendQEMUKey(ctx context.Context, down bool, keysym, keycode uint32) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendQEMUKey(ctx, down, keysym, keycode)
}

// SendCutText sets the server's clipboard (ISO 8859-1; other characters
// become '?').
func (m *Mirror) SendCutText(ctx context.Context, text string) error {
	c, err := m.currentClient()
	if err != nil {
		return err
	}
	return c.SendCutText(ctx, text)
}
