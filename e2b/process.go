package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// envd's process service. A process runs in the guest through the drive
// service's streaming exec, under a context of the server's, not the
// request's: like envd's, it outlives the client that started it (a
// background command) and is reached again by pid (Connect, SendSignal).

// processConfig is envd's ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type startRequest struct {
	Process processConfig   `json:"process"`
	PTY     json.RawMessage `json:"pty,omitempty"`
	Tag     *string         `json:"tag,omitempty"`
	Stdin   *bool           `json:"stdin,omitempty"`
}

// selector is envd's ProcessSelector.
type selector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

// processEvent is envd's ProcessEvent, one of its fields set.
type processEvent struct {
	Start     *startEvent `json:"start,omitempty"`
	Data      *dataEvent  `json:"data,omitempty"`
	End       *endEvent   `json:"end,omitempty"`
	Keepalive *struct{}   `json:"keepalive,omitempty"`
}

type startEvent struct {
	PID int `json:"pid"`
}

// dataEvent carries output; []byte encodes as base64, as proto3 JSON does.
type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
}

type endEvent struct {
	ExitCode int    `json:"exitCode"`
	Exited   bool   `json:"exited"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
}

type eventMessage struct {
	Event processEvent `json:"event"`
}

// Bounds of the process service.
const (
	maxProcesses = 64 // running per sandbox
	// keepaliveEvery is well inside the 50 s the SDK asks for, so no proxy
	// idles the stream out.
	keepaliveEvery = 20 * time.Second
	// startWait bounds the wait for the guest to run a program.
	startWait = 30 * time.Second
	// subscriberBuffer is output held for one slow stream before the
	// process's output waits for it.
	subscriberBuffer = 256
)

// proc is one program started through envd.
type proc struct {
	sandbox string
	config  processConfig
	tag     string
	cancel  context.CancelFunc
	started chan struct{} // closed once pid is set or the start failed
	done    chan struct{} // closed once end or err is set

	mu   sync.Mutex
	pid  int
	subs map[chan processEvent]struct{}
	end  *endEvent
	err  error
	// timedOut says the caller's deadline killed it.
	timedOut bool
}

func (p *proc) subscribe() chan processEvent {
	ch := make(chan processEvent, subscriberBuffer)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	p.mu.Unlock()
	return ch
}

func (p *proc) unsubscribe(ch chan processEvent) {
	p.mu.Lock()
	delete(p.subs, ch)
	p.mu.Unlock()
}

// publish hands output to every stream; one that is full gets a short
// grace, then loses this chunk rather than stall the others.
func (p *proc) publish(ev processEvent) {
	p.mu.Lock()
	subs := slices.Collect(maps.Keys(p.subs))
	p.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- ev:
		case <-time.After(time.Second):
		}
	}
}

// processes are the server's running programs, by sandbox and pid.
type processes struct {
	ctx   context.Context
	guest Guest
	log   *slog.Logger
	mu    sync.Mutex
	bySbx map[string]map[int]*proc
}

func newProcesses(ctx context.Context, g Guest, log *slog.Logger) *processes {
	return &processes{ctx: ctx, guest: g, log: log, bySbx: map[string]map[int]*proc{}}
}

// start runs a program and returns once the guest has it running.
func (ps *processes) start(sandbox string, cfg processConfig, tag string, req drive.ExecRequest) (*proc, chan processEvent, error) {
	ps.mu.Lock()
	if len(ps.bySbx[sandbox]) >= maxProcesses {
		ps.mu.Unlock()
		return nil, nil, rpcErrorf(CodeResourceExhausted, "sandbox %s runs %d processes already: kill some first", sandbox, maxProcesses)
	}
	ps.mu.Unlock()
	ctx, cancel := context.WithCancel(ps.ctx)
	p := &proc{sandbox: sandbox, config: cfg, tag: tag, cancel: cancel, started: make(chan struct{}), done: make(chan struct{}), subs: map[chan processEvent]struct{}{}}
	sub := p.subscribe()
	req.Unbounded = true
	req.Started = func(pid int) {
		p.mu.Lock()
		p.pid = pid
		p.mu.Unlock()
		ps.mu.Lock()
		if ps.bySbx[sandbox] == nil {
			ps.bySbx[sandbox] = map[int]*proc{}
		}
		ps.bySbx[sandbox][pid] = p
		ps.mu.Unlock()
		close(p.started)
	}
	go func() {
		defer cancel()
		res, err := ps.guest.ExecStream(ctx, sandbox, req, func(stream string, data []byte) {
			ev := processEvent{Data: &dataEvent{}}
			if stream == "stderr" {
				ev.Data.Stderr = data
			} else {
				ev.Data.Stdout = data
			}
			p.publish(ev)
		})
		p.mu.Lock()
		if err != nil {
			p.err = err
		} else {
			p.end = endOf(res)
		}
		pid := p.pid
		p.mu.Unlock()
		ps.log.Debug("envd process ended", "sandbox", sandbox, "pid", pid, "cmd", cfg.Cmd, "err", err)
		select {
		case <-p.started:
		default:
			close(p.started) // it never ran
		}
		ps.mu.Lock()
		if m := ps.bySbx[sandbox]; m != nil && m[pid] == p {
			delete(m, pid)
			if len(m) == 0 {
				delete(ps.bySbx, sandbox)
			}
		}
		ps.mu.Unlock()
		close(p.done)
	}()
	select {
	case <-p.started:
	case <-time.After(startWait):
		cancel()
		<-p.done
	}
	p.mu.Lock()
	ran, err := p.pid != 0, p.err
	p.mu.Unlock()
	if !ran {
		if err == nil {
			err = rpcErrorf(CodeUnavailable, "sandbox %s: the guest did not start %s within %s", sandbox, cfg.Cmd, startWait)
		}
		return nil, nil, err
	}
	return p, sub, nil
}

// endOf is envd's end event for how a program ended.
func endOf(res drive.ExecResult) *endEvent {
	if res.Signal != 0 {
		// timeout(1) leads the group: a signal to the group ends it too.
		return &endEvent{ExitCode: -1, Status: "signal: " + signalText(res.Signal), Error: "signal: " + signalText(res.Signal)}
	}
	e := &endEvent{ExitCode: res.ExitCode, Exited: true, Status: fmt.Sprintf("exit status %d", res.ExitCode)}
	if res.ExitCode == 128+9 || res.ExitCode == 128+15 {
		// The program died of the signal and timeout(1) reported it.
		e = &endEvent{ExitCode: -1, Status: "signal: " + signalText(res.ExitCode-128)}
	}
	if e.ExitCode != 0 {
		e.Error = e.Status
	}
	return e
}

func signalText(sig int) string {
	switch sig {
	case 9:
		return "killed"
	case 15:
		return "terminated"
	case 2:
		return "interrupt"
	}
	return fmt.Sprintf("signal %d", sig)
}

// find returns a sandbox's running process by selector.
func (ps *processes) find(sandbox string, sel selector) (*proc, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for pid, p := range ps.bySbx[sandbox] {
		if sel.PID != nil && int(*sel.PID) == pid || sel.Tag != nil && *sel.Tag != "" && *sel.Tag == p.tag {
			return p, nil
		}
	}
	if sel.PID != nil {
		return nil, rpcErrorf(CodeNotFound, "process with pid %d not found in sandbox %s (it ended, or was not started through envd)", *sel.PID, sandbox)
	}
	return nil, rpcErrorf(CodeNotFound, "process not found in sandbox %s: select one by pid or tag", sandbox)
}

func (ps *processes) list(sandbox string) []*proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := slices.Collect(maps.Values(ps.bySbx[sandbox]))
	slices.SortFunc(out, func(a, b *proc) int { return a.pid - b.pid })
	return out
}

// forget ends a deleted or reset sandbox's processes: their guest is gone.
func (ps *processes) forget(sandbox string) {
	ps.mu.Lock()
	procs := ps.bySbx[sandbox]
	delete(ps.bySbx, sandbox)
	ps.mu.Unlock()
	for _, p := range procs {
		p.cancel()
	}
}

// processRPC serves process.Process/{method}.
func (s *Server) processRPC(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	switch m := r.PathValue("method"); m {
	case "Start":
		s.startProcess(w, r, d)
	case "Connect":
		s.connectProcess(w, r, d)
	case "List":
		var req struct{}
		if !readUnary(w, r, &req) {
			return
		}
		type listed struct {
			Config processConfig `json:"config"`
			PID    int           `json:"pid"`
			Tag    string        `json:"tag,omitempty"`
		}
		out := struct {
			Processes []listed `json:"processes"`
		}{Processes: []listed{}}
		for _, p := range s.procs.list(d.ID) {
			out.Processes = append(out.Processes, listed{Config: p.config, PID: p.pid, Tag: p.tag})
		}
		writeUnary(w, out)
	case "SendSignal":
		var req struct {
			Process selector `json:"process"`
			Signal  any      `json:"signal"`
		}
		if !readUnary(w, r, &req) {
			return
		}
		sig, err := signalOf(req.Signal)
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		p, err := s.procs.find(d.ID, req.Process)
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		if err := s.cfg.Guest.Signal(r.Context(), d.ID, p.pid, sig); err != nil {
			writeUnaryError(w, rpcOf(err))
			return
		}
		writeUnary(w, struct{}{})
	case "SendInput", "StreamInput", "CloseStdin", "Update":
		writeUnaryError(w, rpcErrorf(CodeUnimplemented, "process.Process/%s is not implemented by warmdesk: a program's stdin is closed when it starts, and there is no PTY (docs/E2B.md)", m))
	default:
		writeUnaryError(w, rpcErrorf(CodeUnimplemented, "process.Process/%s: no such method", m))
	}
}

// signalOf reads envd's Signal enum, by name or number.
func signalOf(v any) (string, error) {
	switch v {
	case "SIGNAL_SIGKILL", float64(9):
		return "KILL", nil
	case "SIGNAL_SIGTERM", float64(15):
		return "TERM", nil
	}
	return "", rpcErrorf(CodeInvalidArgument, "signal %v: SIGNAL_SIGKILL or SIGNAL_SIGTERM", v)
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	st := newStream(w)
	var req startRequest
	if err := readStreamRequest(r, &req); err != nil {
		st.End(err)
		return
	}
	if len(req.PTY) > 0 && string(req.PTY) != "null" {
		st.End(rpcErrorf(CodeUnimplemented, "PTYs are not implemented by warmdesk: run commands without one (docs/E2B.md)"))
		return
	}
	if req.Process.Cmd == "" {
		st.End(rpcErrorf(CodeInvalidArgument, "process.cmd is required"))
		return
	}
	deadline, err := timeoutOf(r)
	if err != nil {
		st.End(err)
		return
	}
	fc, fast := parseFast(req.Process)
	fast = fast && !s.cfg.GuestOnly
	if s.cfg.Domain == "" && streamStart(req.Process) {
		// Refused whatever the fast paths: it would start a server for a
		// URL that cannot reach it.
		fc, fast = fastCommand{refusal: streamRefusal(r, d.ID)}, true
	}
	if fast {
		ctx := r.Context()
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, deadline)
			defer cancel()
		}
		s.runFast(ctx, d, fc, st)
		return
	}
	user, err := userOf(r, "")
	if err != nil {
		st.End(err)
		return
	}
	execReq, err := s.runAs(r.Context(), d, user, req.Process)
	if err != nil {
		st.End(err)
		return
	}
	if line, ok := sdkLine(req.Process); ok && locationLine.MatchString(line) && !s.cfg.GuestOnly {
		s.awaitPointer(r.Context(), d.ID, execReq)
	}
	tag := ""
	if req.Tag != nil {
		tag = *req.Tag
	}
	p, sub, err := s.procs.start(d.ID, req.Process, tag, execReq)
	if err != nil {
		st.End(rpcOf(err))
		return
	}
	if deadline > 0 {
		// envd kills a program its caller gave a deadline to when it
		// passes, whether or not the caller is still there.
		go func() {
			t := time.NewTimer(deadline)
			defer t.Stop()
			select {
			case <-p.done:
			case <-t.C:
				p.mu.Lock()
				p.timedOut = true
				p.mu.Unlock()
				ctx, cancel := context.WithTimeout(s.procs.ctx, 10*time.Second)
				defer cancel()
				if err := s.cfg.Guest.Signal(ctx, d.ID, p.pid, "KILL"); err != nil {
					p.cancel()
				}
			}
		}()
	}
	s.follow(r.Context(), st, p, sub)
}

func (s *Server) connectProcess(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	st := newStream(w)
	var req struct {
		Process selector `json:"process"`
	}
	if err := readStreamRequest(r, &req); err != nil {
		st.End(err)
		return
	}
	p, err := s.procs.find(d.ID, req.Process)
	if err != nil {
		st.End(err)
		return
	}
	s.follow(r.Context(), st, p, p.subscribe())
}

// follow streams a process's events to one client until it ends or the
// client goes; the process runs on either way.
func (s *Server) follow(ctx context.Context, st *stream, p *proc, sub chan processEvent) {
	defer p.unsubscribe(sub)
	if err := st.Send(eventMessage{Event: processEvent{Start: &startEvent{PID: p.pid}}}); err != nil {
		return
	}
	keepalive := time.NewTicker(keepaliveEvery)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-sub:
			if st.Send(eventMessage{Event: ev}) != nil {
				return
			}
		case <-keepalive.C:
			if st.Send(eventMessage{Event: processEvent{Keepalive: &struct{}{}}}) != nil {
				return
			}
		case <-p.done:
			for len(sub) > 0 {
				if st.Send(eventMessage{Event: <-sub}) != nil {
					return
				}
			}
			p.mu.Lock()
			end, err, timedOut := p.end, p.err, p.timedOut
			p.mu.Unlock()
			if end != nil {
				if st.Send(eventMessage{Event: processEvent{End: end}}) != nil {
					return
				}
			}
			switch {
			case timedOut:
				st.End(rpcErrorf(CodeDeadlineExceeded, "the command ran past its timeout and was killed"))
			case err != nil:
				st.End(rpcOf(err))
			default:
				st.End(nil)
			}
			return
		}
	}
}

// readUnary decodes a unary request's JSON body; on error it has answered.
func readUnary(w http.ResponseWriter, r *http.Request, v any) bool {
	ct := r.Header.Get("Content-Type")
	if ct != "application/json" && ct != "application/json; charset=utf-8" {
		writeUnaryError(w, rpcErrorf(CodeUnimplemented, "content type %q: warmdesk's envd speaks Connect with JSON (application/json)", ct))
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err == nil && len(body) > maxMessage {
		err = fmt.Errorf("request of more than %d bytes", maxMessage)
	}
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeUnaryError(w, rpcErrorf(CodeInvalidArgument, "request: %v", err))
		return false
	}
	return true
}

// readStreamRequest decodes the one enveloped message of a server
// stream's request.
func readStreamRequest(r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	if ct != "application/connect+json" && ct != "application/connect+json; charset=utf-8" {
		return rpcErrorf(CodeUnimplemented, "content type %q: warmdesk's envd streams Connect with JSON (application/connect+json)", ct)
	}
	_, msg, err := readEnvelope(r.Body)
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) {
			return re
		}
		return rpcErrorf(CodeInvalidArgument, "request: %v", err)
	}
	if err := json.Unmarshal(msg, v); err != nil {
		return rpcErrorf(CodeInvalidArgument, "request: %v", err)
	}
	return nil
}
