// Package qemuvmtest has a fake qemuvm.Monitor for unit tests of code that
// speaks QMP: it records every command, answers with scripted replies and
// delivers events to subscribers, as go-qemu's qmptest does for its
// monitor.
package qemuvmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Command is one command the monitor received.
type Command struct {
	Name string
	// Args is the command's arguments as JSON ("null" for none).
	Args json.RawMessage
}

// Handler answers one command: its result is JSON-encoded into the
// caller's result value.
type Handler func(args json.RawMessage) (result any, err error)

// Monitor is a fake qemuvm.Monitor. Commands nobody scripted succeed with
// an empty return. It is safe for concurrent use.
type Monitor struct {
	mu       sync.Mutex
	handlers map[string]Handler
	commands []Command
	subs     map[*subscription]struct{}
}

var _ qemuvm.Monitor = (*Monitor)(nil)

// New returns a monitor with nothing scripted.
func New() *Monitor {
	return &Monitor{handlers: map[string]Handler{}, subs: map[*subscription]struct{}{}}
}

// Handle scripts the answer to every later command of that name.
func (m *Monitor) Handle(command string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handlers[command] = h
}

// Reply scripts a result for command.
func (m *Monitor) Reply(command string, result any) {
	m.Handle(command, func(json.RawMessage) (any, error) { return result, nil })
}

// Fail scripts an error for command.
func (m *Monitor) Fail(command string, err error) {
	m.Handle(command, func(json.RawMessage) (any, error) { return nil, err })
}

// Commands returns what the monitor received so far, in order.
func (m *Monitor) Commands() []Command {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Command(nil), m.commands...)
}

// Names returns the names of the commands received so far, in order.
func (m *Monitor) Names() []string {
	var out []string
	for _, c := range m.Commands() {
		out = append(out, c.Name)
	}
	return out
}

// Execute records the command and answers it.
func (m *Monitor) Execute(ctx context.Context, command string, args, result any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%s: encode: %w", command, err)
	}
	m.mu.Lock()
	m.commands = append(m.commands, Command{Name: command, Args: raw})
	h := m.handlers[command]
	m.mu.Unlock()
	if h == nil {
		return nil
	}
	ret, err := h(raw)
	if err != nil {
		return err
	}
	if result == nil || ret == nil {
		return nil
	}
	b, err := json.Marshal(ret)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, result)
}

// Emit delivers an event to every current subscriber. Handlers may emit
// (to play an event a command causes).
func (m *Monitor) Emit(name string, data any) {
	raw, _ := json.Marshal(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		s.ch <- event{name, raw}
	}
}

// Hangup ends every subscription, as a machine that goes away does: a
// Wait in progress fails.
func (m *Monitor) Hangup() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		delete(m.subs, s)
		close(s.ch)
	}
}

// Subscribers counts the subscriptions not closed yet, to check that code
// under test closes what it opens.
func (m *Monitor) Subscribers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

// Subscribe returns the events emitted from now on.
func (m *Monitor) Subscribe(ctx context.Context) (qemuvm.Events, error) {
	s := &subscription{m: m, ch: make(chan event, 64)}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	return s, nil
}

type event struct {
	name string
	data json.RawMessage
}

type subscription struct {
	m  *Monitor
	ch chan event
}

// ErrClosed is what Wait returns on a closed subscription.
var ErrClosed = errors.New("qemuvmtest: subscription closed")

func (s *subscription) Wait(ctx context.Context, name string) (json.RawMessage, error) {
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return nil, ErrClosed
			}
			if ev.name == name {
				return ev.data, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		}
	}
}

func (s *subscription) Close() {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if _, ok := s.m.subs[s]; ok {
		delete(s.m.subs, s)
		close(s.ch)
	}
}
