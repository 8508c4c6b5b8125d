package vnc

import (
	"bufio"
	"context"
	"fmt"
	"image"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ClientOptions configures NewClient.
type ClientOptions struct {
	// Password for VNC Authentication (QEMU's password=on); empty for None.
	Password string
	Limits   Limits
	// Encodings to advertise; nil means MirrorEncodings. Only Raw,
	// CopyRect and the pseudo-encodings the decoder knows can be decoded.
	Encodings []Encoding
	// WriteTimeout bounds every write to the server (default 5 s).
	WriteTimeout time.Duration
}

const defaultWriteTimeout = 5 * time.Second

// Client is the client side of one RFB connection. One goroutine reads with
// ReadMessage, and only it may look at Framebuffer; the Send and Request
// methods may be called from any goroutine at the same time.
type Client struct {
	conn         net.Conn
	dec          *decoder
	init         ServerInit
	writeTimeout time.Duration

	wmu  sync.Mutex
	wbuf []byte

	extendedKeys atomic.Bool
	closeOnce    sync.Once
}

// NewClient runs the handshake on conn (ProtocolVersion, security,
// ClientInit with shared=1, ServerInit), then sets the RGBX pixel format and
// advertises the encodings. It closes conn when it fails. ctx bounds the
// handshake only.
func NewClient(ctx context.Context, conn net.Conn, opts ClientOptions) (*Client, error) {
	lim := opts.Limits.withDefaults()
	c := &Client{conn: conn, writeTimeout: opts.WriteTimeout}
	if c.writeTimeout <= 0 {
		c.writeTimeout = defaultWriteTimeout
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := interruptOnDone(ctx, conn.SetDeadline)
	br := bufio.NewReaderSize(conn, 64<<10)
	init, err := clientHandshake(br, conn, opts.Password, lim)
	stop()
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rfb handshake: %w (%w)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("rfb handshake: %w", err)
	}
	c.init = init
	c.dec = newDecoder(br, lim, init.Width, init.Height)
	c.dec.name = init.Name

	encs := opts.Encodings
	if encs == nil {
		encs = MirrorEncodings
	}
	msg := appendSetPixelFormat(nil, pixelFormatBGRX)
	msg = appendSetEncodings(msg, encs)
	if err := c.write(ctx, msg); err != nil {
		return nil, fmt.Errorf("set pixel format and encodings: %w", err)
	}
	return c, nil
}

// ServerInit returns what the server sent at initialisation.
func (c *Client) ServerInit() ServerInit { return c.init }

// Name returns the desktop name, updated by the DesktopName pseudo-encoding.
// Reader goroutine only.
func (c *Client) Name() string { return c.dec.name }

// Framebuffer returns the client's copy of the framebuffer, RGBA with alpha
// 255. A resize replaces it. Only the goroutine calling ReadMessage may use
// it, between calls.
func (c *Client) Framebuffer() *image.RGBA { return c.dec.fb }

// Cursor returns the last Cursor pseudo-encoding as an image and its
// hotspot; ok is false until the server sent one. The image is never
// modified afterwards. Reader goroutine only.
func (c *Client) Cursor() (img *image.RGBA, hotspot image.Point, ok bool) {
	return c.dec.cursor, c.dec.hotspot, c.dec.hasCursor
}

// ExtendedKeyEvents reports whether the server acknowledged QEMU's extended
// key events.
func (c *Client) ExtendedKeyEvents() bool { return c.extendedKeys.Load() }

// ReadMessage reads one message from the server and applies it to the
// framebuffer. The returned message is valid until the next call.
func (c *Client) ReadMessage(ctx context.Context) (ServerMessage, error) {
	stop := interruptOnDone(ctx, c.conn.SetReadDeadline)
	msg, err := c.dec.readMessage()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if u, ok := msg.(*FramebufferUpdate); ok && u.ExtendedKeyEvents {
		c.extendedKeys.Store(true)
	}
	return msg, nil
}

// RequestUpdate sends FramebufferUpdateRequest for the whole framebuffer.
// size is the framebuffer's size as the caller knows it.
func (c *Client) RequestUpdate(ctx context.Context, incremental bool, size image.Point) error {
	return c.send(ctx, "framebuffer update request", func(b []byte) []byte {
		return appendFramebufferUpdateRequest(b, incremental, image.Rectangle{Max: size})
	})
}

// SendKey sends KeyEvent (section 7.5.4) for an X keysym.
func (c *Client) SendKey(ctx context.Context, down bool, keysym uint32) error {
	return c.send(ctx, "key event", func(b []byte) []byte { return appendKeyEvent(b, down, keysym) })
}

// SendPointer sends PointerEvent (section 7.5.5): buttons is the mask (bit 0
// left, 1 middle, 2 right, 3 and 4 wheel up and down), x and y pixels.
func (c *Client) SendPointer(ctx context.Context, buttons uint8, x, y int) error {
	if x < 0 || y < 0 || x > 0xffff || y > 0xffff {
		return fmt.Errorf("pointer position %d,%d out of range", x, y)
	}
	return c.send(ctx, "pointer event", func(b []byte) []byte { return appendPointerEvent(b, buttons, uint16(x), uint16(y)) })
}

// SendQEMUKey sends QEMU's extended key event (message 255, submessage 0)
// with an XT keycode next to the keysym. It needs the server's
// acknowledgement, which QEMU sends right after SetEncodings.
func (c *Client) SendQEMUKey(ctx context.Context, down bool, keysym, keycode uint32) error {
	if !c.extendedKeys.Load() {
		return fmt.Errorf("qemu extended key event: %w", ErrUnsupported)
	}
	return c.send(ctx, "qemu extended key event", func(b []byte) []byte {
		return appendQEMUExtendedKeyEvent(b, down, keysym, keycode)
	})
}

// SendCutText sends ClientCutText (section 7.5.6). RFB carries ISO 8859-1:
// characters outside it become '?'.
func (c *Client) SendCutText(ctx context.Context, text string) error {
	data := latin1(text)
	if len(data) > c.dec.lim.MaxCutText {
		return fmt.Errorf("client cut text of %d bytes over the limit of %d", len(data), c.dec.lim.MaxCutText)
	}
	return c.send(ctx, "client cut text", func(b []byte) []byte { return appendClientCutText(b, data) })
}

// Close closes the connection; a blocked ReadMessage returns.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.conn.Close() })
	return err
}

func (c *Client) send(ctx context.Context, what string, encode func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = encode(c.wbuf[:0])
	if err := c.writeLocked(ctx, c.wbuf); err != nil {
		return fmt.Errorf("send %s: %w", what, err)
	}
	return nil
}

func (c *Client) write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(ctx, msg)
}

// writeLocked writes msg whole or closes the connection: a partial message
// would corrupt the stream.
func (c *Client) writeLocked(ctx context.Context, msg []byte) error {
	deadline := time.Now().Add(c.writeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.conn.SetWriteDeadline(deadline); err != nil {
		c.Close()
		return err
	}
	stop := interruptOnDone(ctx, c.conn.SetWriteDeadline)
	_, err := c.conn.Write(msg)
	stop()
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return err
	}
	return nil
}

// interruptOnDone makes a blocked read or write return when ctx is done, by
// moving its deadline into the past. The returned stop waits for that to
// have happened, if it started, so it cannot clobber a later deadline.
func interruptOnDone(ctx context.Context, setDeadline func(time.Time) error) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		_ = setDeadline(time.Unix(1, 0))
		close(done)
	})
	return func() {
		if !stopAfter() {
			<-done
		}
	}
}
