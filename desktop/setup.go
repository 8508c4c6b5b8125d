package desktop

import (
	"context"
	"fmt"
	"time"
)

// Bounds on a snapshot's on_create commands: each may take a while (an
// app's first settings under TCG), all of them together are bounded so a
// stuck one cannot hold the desktop's guest commands back for ever.
const (
	setupCommandTimeout = 2 * time.Minute
	setupTimeout        = 5 * time.Minute
	setupOutputTail     = 2 << 10
)

// runSetup runs a new desktop's on_create commands in order through its
// guest agent, stopping at the first that fails, and records the outcome
// on the desktop and as an event: a failure is never only in a log.
// notReady is why the guest could not take them, if it could not.
func (m *Manager) runSetup(ctx context.Context, e *entry, mach Machine, cmds []string, notReady error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	start := time.Now()
	s := Setup{State: SetupDone, Commands: len(cmds)}
	if notReady != nil {
		s.State, s.Failed, s.Command = SetupFailed, 1, cmds[0]
		s.Error = "the guest was not ready for them: " + notReady.Error()
		cmds = nil
	}
	for i, c := range cmds {
		res, err := Exec(ctx, mach.Agent(), ExecRequest{Path: "/bin/sh", Args: []string{"-c", c}, Timeout: setupCommandTimeout, MaxOutput: 64 << 10})
		if err == nil && res.ExitCode == 0 {
			continue
		}
		s.State, s.Failed, s.Command = SetupFailed, i+1, c
		if err != nil {
			s.Error = err.Error()
		} else {
			s.ExitCode = res.ExitCode
			s.Output = tail(string(res.Stdout)+string(res.Stderr), setupOutputTail)
		}
		break
	}
	s.Seconds = time.Since(start).Seconds()
	e.mu.Lock()
	if e.d.State == StateDeleted || e.d.State == StateStopping {
		e.mu.Unlock()
		return
	}
	if e.m != mach && s.State != SetupFailed {
		// Hibernated meanwhile: what ran is not known to have finished.
		s.State, s.Error = SetupFailed, "the desktop stopped or was hibernated while they ran"
	}
	e.d.Setup = &s
	d := e.d
	e.mu.Unlock()
	if err := m.putBeside(e, d); err != nil {
		m.log.Error("record a desktop's setup", "desktop", d.ID, "err", err)
	}
	summary := fmt.Sprintf("on_create: %d commands done in %.1fs", s.Commands, s.Seconds)
	if s.State == SetupFailed {
		summary = fmt.Sprintf("on_create command %d of %d failed (%s): exit %d %s", s.Failed, s.Commands, s.Command, s.ExitCode, s.Error)
		m.log.Warn("on_create failed", "desktop", d.ID, "command", s.Command, "exit", s.ExitCode, "err", s.Error, "output", s.Output)
	}
	m.events.Publish(Event{Type: EventSetup, Desktop: d, Time: m.now().UTC(), Summary: summary})
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
