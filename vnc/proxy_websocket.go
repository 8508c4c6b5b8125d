package vnc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// ServeWebSocket upgrades an HTTP request, already authenticated by the
// caller, to a WebSocket of binary RFB (noVNC), and relays it to a new
// connection to the desktop from dial. It accepts the "binary" subprotocol
// that noVNC may ask for, or none. A desktop whose VNC server is busy
// taking connections is waited for (dialRetry); one that cannot be reached
// within HandshakeTimeout is answered 502 before upgrading, and logged. It returns when the session ends: the viewer
// or the desktop hung up, the viewer fell behind (ErrSlowViewer), or
// r.Context() is done; nil when the viewer hung up.
func ServeWebSocket(w http.ResponseWriter, r *http.Request, dial Dialer, opts ProxyOptions) error {
	opts = opts.withDefaults()
	dctx, cancel := context.WithTimeout(r.Context(), opts.HandshakeTimeout)
	up, err := dialRetry(dctx, dial)
	cancel()
	if err != nil {
		// The reason names the machine's socket: it goes to the log, not to
		// the viewer.
		opts.Logger.Warn("vnc viewer refused: the desktop's display could not be reached", "err", err)
		http.Error(w, "desktop display unavailable: its VNC server could not be reached (hostd's log says why); try again", http.StatusBadGateway)
		return fmt.Errorf("dial desktop: %w", err)
	}
	upgrader := websocket.Upgrader{
		HandshakeTimeout: opts.HandshakeTimeout,
		ReadBufferSize:   32 << 10,
		WriteBufferSize:  64 << 10,
		Subprotocols:     []string{"binary"},
		CheckOrigin:      opts.CheckOrigin,
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		up.Close()
		return fmt.Errorf("websocket upgrade: %w", err)
	}
	// A viewer message is at most a cut text; noVNC sends small ones.
	ws.SetReadLimit(int64(opts.Limits.MaxCutText) + 64<<10)
	return relay(r.Context(), &wsViewer{ws: ws}, up, nil, opts)
}

// wsViewer makes a WebSocket a byte stream: reads run across message
// boundaries, and each write is one binary message.
type wsViewer struct {
	ws *websocket.Conn
	r  io.Reader
}

func (v *wsViewer) Read(p []byte) (int, error) {
	for {
		if v.r == nil {
			typ, r, err := v.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
					return 0, io.EOF
				}
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, fmt.Errorf("websocket message type %d, want binary: %w", typ, ErrProtocol)
			}
			v.r = r
		}
		n, err := v.r.Read(p)
		if errors.Is(err, io.EOF) {
			v.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (v *wsViewer) Write(p []byte) (int, error) {
	if err := v.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (v *wsViewer) writeChunks(chunks [][]byte) error {
	w, err := v.ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

func (v *wsViewer) SetReadDeadline(t time.Time) error  { return v.ws.SetReadDeadline(t) }
func (v *wsViewer) SetWriteDeadline(t time.Time) error { return v.ws.SetWriteDeadline(t) }

// close sends a close frame saying why, if the connection takes it
// promptly, and closes.
func (v *wsViewer) close(cause error) error {
	code, text := websocket.CloseNormalClosure, ""
	switch {
	case errors.Is(cause, ErrSlowViewer):
		code, text = websocket.ClosePolicyViolation, "viewer fell behind"
	case errors.Is(cause, errDesktopClosed):
		code, text = websocket.CloseGoingAway, "desktop display closed"
	case errors.Is(cause, ErrProtocol):
		code, text = websocket.CloseProtocolError, "rfb protocol violation"
	case cause != nil && !errors.Is(cause, errViewerClosed) && !errors.Is(cause, context.Canceled):
		code = websocket.CloseInternalServerErr
	}
	_ = v.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(250*time.Millisecond))
	return v.ws.Close()
}
