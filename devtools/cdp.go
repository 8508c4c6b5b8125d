package devtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
)

// DialFunc makes a connection to Chromium's debugging port (through the
// bridge, for a desktop).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Event is one DevTools event: on a page session, or the browser's when
// Session is empty.
type Event struct {
	Session string
	Method  string
	Params  json.RawMessage
}

// CommandError is a DevTools command Chromium answered with an error.
type CommandError struct {
	Method  string
	Code    int
	Message string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %s (DevTools error %d)", e.Method, e.Message, e.Code)
}

// ErrClosed says the client's connection has ended.
var ErrClosed = errors.New("the DevTools connection is closed")

// Client is one connection to Chromium's browser socket: commands, each
// answered by its id, on the browser or on a page session (flattened),
// and events handed to one handler in the order they came. It is safe for
// concurrent use.
type Client struct {
	ws *websocket.Conn

	wmu sync.Mutex // one frame written at a time

	mu      sync.Mutex
	next    int64
	pending map[int64]chan answer
	err     error
	done    chan struct{}
}

type answer struct {
	result json.RawMessage
	err    *CommandError
}

// Connect discovers the browser's socket (/json/version) and connects to
// it. onEvent, which may be nil, gets every event on the client's reading
// goroutine: it must not block, nor call the client.
func Connect(ctx context.Context, dial DialFunc, onEvent func(Event)) (*Client, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/json/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("/json/version: %w", err)
	}
	var version struct {
		WebSocket string `json:"webSocketDebuggerUrl"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&version)
	resp.Body.Close()
	if err != nil || version.WebSocket == "" {
		return nil, fmt.Errorf("/json/version: no browser socket (%v)", err)
	}
	ws, _, err := (&websocket.Dialer{NetDialContext: dial}).DialContext(ctx, version.WebSocket, nil)
	if err != nil {
		return nil, fmt.Errorf("the browser's socket: %w", err)
	}
	return NewClient(ws, onEvent), nil
}

// NewClient runs a client on a connected browser socket.
func NewClient(ws *websocket.Conn, onEvent func(Event)) *Client {
	ws.SetReadLimit(256 << 20) // a full-page screenshot is large
	c := &Client{ws: ws, pending: map[int64]chan answer{}, done: make(chan struct{})}
	go c.read(onEvent)
	return c
}

func (c *Client) read(onEvent func(Event)) {
	var err error
	defer func() { c.fail(err) }()
	for {
		var in struct {
			ID     int64           `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			SessionID string `json:"sessionId"`
		}
		if err = c.ws.ReadJSON(&in); err != nil {
			return
		}
		if in.ID == 0 {
			if onEvent != nil && in.Method != "" {
				onEvent(Event{Session: in.SessionID, Method: in.Method, Params: in.Params})
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[in.ID]
		delete(c.pending, in.ID)
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		a := answer{result: in.Result}
		if in.Error != nil {
			a.err = &CommandError{Code: in.Error.Code, Message: in.Error.Message}
		}
		ch <- a
	}
}

// fail ends the client: every waiting call returns ErrClosed.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	close(c.done)
	c.ws.Close()
}

// Call sends a command (on a page session, or the browser's when session
// is empty) and waits for its answer, decoded into result when not nil.
func (c *Client) Call(ctx context.Context, session, method string, params, result any) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	c.next++
	id := c.next
	ch := make(chan answer, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	c.wmu.Lock()
	err := c.ws.WriteJSON(msg)
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			a.err.Method = method
			return a.err
		}
		if result != nil {
			if err := json.Unmarshal(a.result, result); err != nil {
				return fmt.Errorf("%s: its answer: %w", method, err)
			}
		}
		return nil
	case <-c.done:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Done closes when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close ends the connection.
func (c *Client) Close() error {
	c.fail(errors.New("closed by the client"))
	return nil
}
