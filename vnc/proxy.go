package vnc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// The viewer proxy relays RFB between one viewer and a new connection to the
// desktop's VNC server (QEMU runs with share=force-shared, so viewers and the
// mirror coexist). It terminates both handshakes itself: the viewer sees
// security None or the proxy's own VNC password, never QEMU's, and the proxy
// forwards QEMU's ServerInit. After that, server data goes to the viewer
// unparsed through a bounded queue, and the viewer's messages are framed
// one by one (clientFilter) on their way to the server.

// ProxyOptions configures ServeWebSocket, ServeConn and ListenTCP.
type ProxyOptions struct {
	// Password for QEMU's VNC Authentication, on the connection to the
	// desktop; empty for None.
	Password string
	// ViewerPassword makes viewers pass VNC Authentication with it (only
	// its first 8 bytes count); empty offers them None, for WebSocket
	// viewers that web/ has authenticated. ListenTCP always has one.
	ViewerPassword string
	// ViewOnly drops the viewer's KeyEvent, PointerEvent, ClientCutText,
	// QEMU key events, xvp and SetDesktopSize.
	ViewOnly bool
	// AllowDesktopResize forwards SetDesktopSize from viewers that are not
	// view-only. Off by default: a viewer's window would resize the agent's
	// screen.
	AllowDesktopResize bool
	Logger             *slog.Logger
	Stats              *ProxyStats
	Limits             Limits
	// MaxQueueBytes is a viewer's budget of server data not yet written to
	// it (default 16 MiB); a viewer over it is cut off.
	MaxQueueBytes int
	// WriteTimeout bounds each write to the viewer and to the desktop
	// (default 10 s).
	WriteTimeout time.Duration
	// HandshakeTimeout bounds dialing the desktop and both handshakes
	// (default 10 s).
	HandshakeTimeout time.Duration
	// CheckOrigin decides WebSocket upgrades; nil keeps gorilla's default,
	// which accepts only same-origin browsers.
	CheckOrigin func(r *http.Request) bool
}

const (
	defaultMaxQueueBytes = 16 << 20
	defaultProxyTimeout  = 10 * time.Second
	chunkSize            = 64 << 10
	// Reads shorter than this are copied out so that a queued chunk does
	// not pin a whole chunkSize buffer.
	smallChunk    = 8 << 10
	maxBatchBytes = 1 << 20
)

func (o ProxyOptions) withDefaults() ProxyOptions {
	o.Limits = o.Limits.withDefaults()
	if o.MaxQueueBytes <= 0 {
		o.MaxQueueBytes = defaultMaxQueueBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultProxyTimeout
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultProxyTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

var (
	errViewerClosed  = errors.New("viewer closed the connection")
	errDesktopClosed = errors.New("desktop closed the vnc connection")
)

// viewerStream is a viewer's side of the relay: a TCP connection or a
// WebSocket.
type viewerStream interface {
	io.Reader
	io.Writer
	// writeChunks writes chunks in order, as one WebSocket message.
	writeChunks(chunks [][]byte) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	// close ends the stream, telling a WebSocket viewer why.
	close(cause error) error
}

// ServeConn relays RFB between viewer, an ordinary VNC client, and a new
// connection to the desktop from dial, until either side closes or ctx is
// done. The viewer's handshake comes first, so that a viewer without the
// password never causes a connection to QEMU. It closes viewer. It returns
// nil when the viewer hung up.
func ServeConn(ctx context.Context, viewer net.Conn, dial Dialer, opts ProxyOptions) error {
	return relay(ctx, &connViewer{Conn: viewer}, nil, dial, opts.withDefaults())
}

// relay runs one viewer's session over v and the desktop connection up
// (dialled after the viewer's handshake when nil), and closes both. opts has
// its defaults.
func relay(ctx context.Context, v viewerStream, up net.Conn, dial Dialer, opts ProxyOptions) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var upMu sync.Mutex // up is set after the viewer's handshake
	closeUp := func() {
		upMu.Lock()
		defer upMu.Unlock()
		if up != nil {
			up.Close()
		}
	}
	// Closing both ends is what unblocks every read and write below.
	stopClose := context.AfterFunc(ctx, func() {
		closeUp()
		v.close(context.Cause(ctx))
	})
	defer func() {
		if stopClose() {
			closeUp()
			v.close(err)
		}
	}()

	lim := opts.Limits
	deadline := time.Now().Add(opts.HandshakeTimeout)
	_ = v.SetReadDeadline(deadline)
	_ = v.SetWriteDeadline(deadline)
	vr := bufio.NewReaderSize(v, 32<<10)
	if _, err := acceptViewer(vr, v, opts.ViewerPassword, lim); err != nil {
		return fmt.Errorf("viewer handshake: %w", err)
	}
	if up == nil {
		dctx, dcancel := context.WithDeadline(ctx, deadline)
		conn, err := dialRetry(dctx, dial)
		dcancel()
		if err != nil {
			return fmt.Errorf("dial desktop: %w", err)
		}
		upMu.Lock()
		up = conn
		upMu.Unlock()
		if ctx.Err() != nil {
			conn.Close()
			return context.Cause(ctx)
		}
	}
	_ = up.SetDeadline(deadline)
	ur := bufio.NewReaderSize(up, chunkSize)
	init, err := clientHandshake(ur, up, opts.Password, lim)
	if err != nil {
		return fmt.Errorf("desktop handshake: %w", err)
	}
	if _, err := v.Write(appendServerInit(nil, init)); err != nil {
		return fmt.Errorf("write server init to viewer: %w", err)
	}
	_ = v.SetReadDeadline(time.Time{})
	_ = up.SetDeadline(time.Time{})

	opts.Stats.viewerStarted()
	q := newChunkQueue(opts.MaxQueueBytes)
	filter := &clientFilter{viewOnly: opts.ViewOnly, allowResize: opts.AllowDesktopResize, maxCutText: lim.MaxCutText}
	var wg sync.WaitGroup
	wg.Go(func() { cancel(pumpFromDesktop(ur, q)) })
	wg.Go(func() { cancel(pumpToViewer(ctx, v, q, opts)) })
	wg.Go(func() { cancel(pumpFromViewer(vr, up, filter, opts)) })
	wg.Wait()

	cause := context.Cause(ctx)
	slow := errors.Is(cause, ErrSlowViewer)
	opts.Stats.viewerEnded(slow)
	switch {
	case errors.Is(cause, errViewerClosed):
		return nil
	case slow:
		opts.Logger.Warn("vnc viewer cut off", "err", cause)
	}
	return cause
}

// pumpFromDesktop queues the desktop's data for the viewer and never waits
// for the viewer: a queue over budget ends the session instead.
func pumpFromDesktop(ur *bufio.Reader, q *chunkQueue) error {
	buf := make([]byte, chunkSize)
	for {
		n, err := ur.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if n < smallChunk {
				chunk = append([]byte(nil), buf[:n]...)
			} else {
				buf = make([]byte, chunkSize)
			}
			if !q.push(chunk) {
				return fmt.Errorf("more than %d bytes waiting for the viewer: %w", q.max, ErrSlowViewer)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errDesktopClosed
			}
			return fmt.Errorf("read from desktop: %w", err)
		}
	}
}

func pumpToViewer(ctx context.Context, v viewerStream, q *chunkQueue, opts ProxyOptions) error {
	var batch [][]byte
	for {
		var err error
		batch, err = q.popBatch(ctx, batch[:0], maxBatchBytes)
		if err != nil {
			return err
		}
		n := 0
		for _, c := range batch {
			n += len(c)
		}
		_ = v.SetWriteDeadline(time.Now().Add(opts.WriteTimeout))
		if err := v.writeChunks(batch); err != nil {
			return fmt.Errorf("write to viewer: %w", err)
		}
		q.release(batch)
		clear(batch)
		opts.Stats.addToViewers(n)
	}
}

func pumpFromViewer(vr *bufio.Reader, up net.Conn, f *clientFilter, opts ProxyOptions) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := vr.Read(buf)
		if n > 0 {
			opts.Stats.addFromViewers(n)
			out, ferr := f.feed(buf[:n])
			opts.Stats.addDropped(f.dropped)
			f.dropped = 0
			if len(out) > 0 {
				_ = up.SetWriteDeadline(time.Now().Add(opts.WriteTimeout))
				if _, err := up.Write(out); err != nil {
					return fmt.Errorf("write to desktop: %w", err)
				}
			}
			if ferr != nil {
				return fmt.Errorf("viewer stream: %w", ferr)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errViewerClosed
			}
			return fmt.Errorf("read from viewer: %w", err)
		}
	}
}

// connViewer is a viewer on a plain connection.
type connViewer struct {
	net.Conn
	bufs net.Buffers
}

func (c *connViewer) writeChunks(chunks [][]byte) error {
	// WriteTo consumes its slice: hand it a copy.
	c.bufs = append(c.bufs[:0], chunks...)
	_, err := c.bufs.WriteTo(c.Conn)
	clear(c.bufs[:cap(c.bufs)])
	return err
}

func (c *connViewer) close(error) error { return c.Conn.Close() }
