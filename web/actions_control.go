package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// The control WebSocket lets one agent pipeline requests without HTTP
// round trips: it sends JSON messages with its own ids, the server answers
// each id once (result or error) and sends events between answers.
// Batches run one after another in the order they arrived (the desktop's
// runner queues them with HTTP batches, in arrival order); execs run
// beside them.

// Bounds of a control session.
const (
	controlProtocol = "warmdesk.v1"
	// controlQueue bounds batches waiting to run; one more is refused
	// (429) rather than queued without end.
	controlQueue = 32
	// controlExecs bounds execs running at once on one session.
	controlExecs = 4
	// controlOut bounds messages waiting to be written. Answers wait for
	// room; screen events are dropped when it is full (the next one says
	// the same).
	controlOut      = 64
	controlReadMax  = 2 << 20
	controlPing     = 30 * time.Second
	controlDeadline = 90 * time.Second // without any frame from the agent
	controlWrite    = 10 * time.Second
	// screenEventEvery throttles screen.changed events.
	screenEventEvery = 100 * time.Millisecond
)

type controlSession struct {
	s   *Server
	ws  *websocket.Conn
	id  string
	out chan api.ControlReply
	// What the token that opened the socket reaches: exec needs a shell
	// role, an upscaled picture the daemon's token.
	shell, noUpscale bool

	batches chan controlBatch
	execs   chan struct{} // semaphore

	mu       sync.Mutex
	inFlight map[string]context.CancelFunc
	wg       sync.WaitGroup
}

type controlBatch struct {
	id  string
	req drive.Request
	ctx context.Context
}

func (s *Server) controlSocket(c *gin.Context) {
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return
	}
	up := websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		Subprotocols:     []string{controlProtocol},
		CheckOrigin:      sameHost,
	}
	ws, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer ws.Close()
	ws.SetReadLimit(controlReadMax)
	g, perDesktop := grantOf(c)
	sess := &controlSession{
		s: s, ws: ws, id: id,
		shell:     !perDesktop || roleLevel[g.role] >= needShell,
		noUpscale: perDesktop,
		out:       make(chan api.ControlReply, controlOut),
		batches:   make(chan controlBatch, controlQueue),
		execs:     make(chan struct{}, controlExecs),
		inFlight:  map[string]context.CancelFunc{},
	}
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	defer s.endOnRevoke(c, cancel)()
	// Subscribed before the hello, so no change after it goes unsaid.
	events, stopEvents := s.cfg.Manager.Events().Subscribe()
	view := s.view(d)
	sess.send(ctx, api.ControlReply{Type: "hello", Desktop: &view})
	sess.start(ctx, cancel, sess.write)
	sess.start(ctx, cancel, sess.runBatches)
	sess.start(ctx, cancel, func(ctx context.Context) { sess.desktopEvents(ctx, events, stopEvents) })
	sess.start(ctx, cancel, sess.screenEvents)
	err = sess.read(ctx)
	cancel()
	sess.wg.Wait()
	if err != nil && !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) && ctx.Err() == nil {
		s.log.Debug("control socket ended", "desktop", id, "err", err)
	}
}

// start runs fn in the session; when it returns, the session ends.
func (cs *controlSession) start(ctx context.Context, cancel context.CancelFunc, fn func(context.Context)) {
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		defer cancel()
		fn(ctx)
	}()
}

// send queues a message, waiting for room; false once the session ended.
func (cs *controlSession) send(ctx context.Context, m api.ControlReply) bool {
	select {
	case cs.out <- m:
		return true
	case <-ctx.Done():
		return false
	}
}

func (cs *controlSession) write(ctx context.Context) {
	ping := time.NewTicker(controlPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			cs.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return
		case <-ping.C:
			if err := cs.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(controlWrite)); err != nil {
				return
			}
		case m := <-cs.out:
			cs.ws.SetWriteDeadline(time.Now().Add(controlWrite))
			if err := cs.ws.WriteJSON(m); err != nil {
				return
			}
		}
	}
}

func (cs *controlSession) read(ctx context.Context) error {
	extend := func(string) error { return cs.ws.SetReadDeadline(time.Now().Add(controlDeadline)) }
	extend("")
	cs.ws.SetPongHandler(extend)
	for {
		typ, data, err := cs.ws.ReadMessage()
		if err != nil {
			return err
		}
		extend("")
		if typ != websocket.TextMessage {
			cs.reject(ctx, "", &fieldErr{field: "", msg: "send JSON text messages"})
			continue
		}
		cs.dispatch(ctx, data)
	}
}

type fieldErr struct{ field, msg string }

func (e *fieldErr) Error() string { return e.msg }

// reject answers a message that cannot run.
func (cs *controlSession) reject(ctx context.Context, id string, err error) {
	var fe *fieldErr
	if errors.As(err, &fe) {
		cs.send(ctx, api.ControlReply{ID: id, Type: "error", Status: http.StatusBadRequest, Error: &api.ErrorBody{Code: "invalid", Message: fe.msg, Field: fe.field}})
		return
	}
	status, body := errorOf(err)
	cs.send(ctx, api.ControlReply{ID: id, Type: "error", Status: status, Error: &body})
}

func (cs *controlSession) dispatch(ctx context.Context, data []byte) {
	var env api.ControlMessage
	if err := json.Unmarshal(data, &env); err != nil {
		cs.reject(ctx, "", jsonFieldError(err))
		return
	}
	// As readBody does for the HTTP routes.
	if err := input.CheckText(data); err != nil {
		cs.reject(ctx, env.ID, err)
		return
	}
	switch env.Type {
	case "ping":
		cs.send(ctx, api.ControlReply{ID: env.ID, Type: "pong"})
		return
	case "cancel":
		cs.mu.Lock()
		cancel := cs.inFlight[env.ID]
		cs.mu.Unlock()
		if cancel == nil {
			cs.reject(ctx, env.ID, &fieldErr{field: "id", msg: fmt.Sprintf("no request %q in flight", env.ID)})
			return
		}
		cancel()
		return
	case "actions", "exec":
	default:
		cs.reject(ctx, env.ID, &fieldErr{field: "type", msg: fmt.Sprintf("type %q: use actions, exec, cancel or ping", env.Type)})
		return
	}
	if env.ID == "" {
		cs.reject(ctx, "", &fieldErr{field: "id", msg: "id: required, so the answer can name it"})
		return
	}
	rctx, ok := cs.begin(ctx, env.ID)
	if !ok {
		cs.reject(ctx, env.ID, &fieldErr{field: "id", msg: fmt.Sprintf("request %q is already in flight", env.ID)})
		return
	}
	if env.Type == "actions" {
		req, err := decodeControlBatch(data)
		if err != nil {
			cs.finish(env.ID)
			cs.reject(ctx, env.ID, err)
			return
		}
		req.NoUpscale = cs.noUpscale
		select {
		case cs.batches <- controlBatch{id: env.ID, req: req, ctx: rctx}:
		default:
			cs.finish(env.ID)
			cs.send(ctx, api.ControlReply{ID: env.ID, Type: "error", Status: http.StatusTooManyRequests,
				Error: &api.ErrorBody{Code: "busy", Message: fmt.Sprintf("%d batches are waiting on this connection: wait for answers before sending more", controlQueue)}})
		}
		return
	}
	if !cs.shell {
		cs.finish(env.ID)
		cs.send(ctx, api.ControlReply{ID: env.ID, Type: "error", Status: http.StatusForbidden,
			Error: &api.ErrorBody{Code: "forbidden", Message: "this token cannot run commands: exec needs a shell token"}})
		return
	}
	var er struct {
		api.ControlMessage
		api.ExecRequest
	}
	if err := strictJSON(data, &er); err != nil {
		cs.finish(env.ID)
		cs.reject(ctx, env.ID, err)
		return
	}
	req, err := execRequestOf(er.ExecRequest)
	if err != nil {
		cs.finish(env.ID)
		cs.reject(ctx, env.ID, err)
		return
	}
	select {
	case cs.execs <- struct{}{}:
	default:
		cs.finish(env.ID)
		cs.send(ctx, api.ControlReply{ID: env.ID, Type: "error", Status: http.StatusTooManyRequests,
			Error: &api.ErrorBody{Code: "busy", Message: fmt.Sprintf("%d execs are running on this connection", controlExecs)}})
		return
	}
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		defer func() { <-cs.execs }()
		cs.exec(rctx, ctx, env.ID, req, env.Stream)
	}()
}

// begin records a request in flight, with a context "cancel" can end.
func (cs *controlSession) begin(ctx context.Context, id string) (context.Context, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, dup := cs.inFlight[id]; dup {
		return nil, false
	}
	rctx, cancel := context.WithCancel(ctx)
	cs.inFlight[id] = cancel
	return rctx, true
}

func (cs *controlSession) finish(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cancel, ok := cs.inFlight[id]; ok {
		cancel()
		delete(cs.inFlight, id)
	}
}

// answer sends a request's result or error, and forgets the request.
func (cs *controlSession) answer(ctx context.Context, id string, result any, err error) {
	defer cs.finish(id)
	m := api.ControlReply{ID: id, Type: "result"}
	if err != nil {
		status, body := errorOf(err)
		m.Type, m.Status, m.Error = "error", status, &body
	}
	if result != nil {
		b, merr := json.Marshal(result)
		if merr != nil {
			cs.s.log.Error("encode control answer", "err", merr)
		}
		m.Result = b
	}
	cs.send(ctx, m)
}

func (cs *controlSession) runBatches(ctx context.Context) {
	for {
		var b controlBatch
		select {
		case <-ctx.Done():
			return
		case b = <-cs.batches:
		}
		out, err := cs.s.cfg.Drive.Run(b.ctx, cs.id, b.req)
		if err != nil {
			cs.answer(ctx, b.id, nil, err)
			continue
		}
		cs.answer(ctx, b.id, response(out, b.req.Settle), out.Err)
	}
}

func (cs *controlSession) exec(rctx, ctx context.Context, id string, req drive.ExecRequest, stream bool) {
	var res drive.ExecResult
	var err error
	if stream {
		res, err = cs.s.cfg.Drive.ExecStream(rctx, cs.id, req, func(name string, data []byte) {
			m := api.ControlReply{ID: id, Type: "exec.output", Stream: name}
			m.Data, m.DataBase64 = textOrBytes(data)
			cs.send(ctx, m)
		})
	} else {
		res, err = cs.s.cfg.Drive.Exec(rctx, cs.id, req)
	}
	if err != nil {
		cs.answer(ctx, id, nil, err)
		return
	}
	cs.answer(ctx, id, execResponse(res), nil)
}

// desktopEvents forwards the desktop's state and control changes; after
// its deletion the session ends.
func (cs *controlSession) desktopEvents(ctx context.Context, events <-chan desktop.Event, stop func()) {
	for {
		for open := true; open; {
			select {
			case <-ctx.Done():
				stop()
				return
			case ev, ok := <-events:
				if !ok {
					open = false // fell behind: subscribe again
					break
				}
				// The agent knows its own batches: action events are for
				// people watching.
				if ev.Desktop.ID != cs.id || ev.Type == desktop.EventAction {
					continue
				}
				view := cs.s.view(ev.Desktop)
				cs.send(ctx, api.ControlReply{Type: string(ev.Type), Desktop: &view})
				if ev.Type == desktop.EventDeleted {
					stop()
					return
				}
			}
		}
		stop()
		events, stop = cs.s.cfg.Manager.Events().Subscribe()
	}
}

// screenEvents says when the screen changed, at most every
// screenEventEvery; an agent that sees one knows a fresh screenshot shows
// something new.
func (cs *controlSession) screenEvents(ctx context.Context) {
	scr, ok := cs.s.cfg.Drive.Screen(cs.id)
	if !ok {
		<-ctx.Done()
		return
	}
	src := scr.Source()
	last, _ := src.Changed()
	throttle := time.NewTimer(0)
	defer throttle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-throttle.C:
		}
		counter, changed := src.Changed()
		if counter == last {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			counter, _ = src.Changed()
		}
		last = counter
		select {
		case cs.out <- api.ControlReply{Type: "screen.changed", Counter: counter}:
		default: // the writer is behind: the next event carries the news
		}
		throttle.Reset(screenEventEvery)
	}
}
