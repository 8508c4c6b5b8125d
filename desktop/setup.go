// Setting up a guest after a restore: its clock and identity (hostname,
// machine-id) set through the guest agent, then its snapshot's on_create
// commands.

package desktop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"reflect"
	"time"
)

// guestSetup sets guests up after their restores. It holds nothing of the
// Manager's: it reaches only the entry it is given (under e.mu), writes
// that desktop's record through putBeside, and publishes on events.
type guestSetup struct {
	// base is the context set-ups run under: a create's caller going away
	// does not cut its guest's set-up short.
	base   context.Context
	log    *slog.Logger
	now    func() time.Time
	store  Store
	events *Events
}

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
func (g *guestSetup) runSetup(ctx context.Context, e *entry, mach Machine, cmds []string, notReady error) {
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
	if err := g.putBeside(e, d); err != nil {
		g.log.Error("record a desktop's setup", "desktop", d.ID, "err", err)
	}
	summary := fmt.Sprintf("on_create: %d commands done in %.1fs", s.Commands, s.Seconds)
	if s.State == SetupFailed {
		summary = fmt.Sprintf("on_create command %d of %d failed (%s): exit %d %s", s.Failed, s.Commands, s.Command, s.ExitCode, s.Error)
		g.log.Warn("on_create failed", "desktop", d.ID, "command", s.Command, "exit", s.ExitCode, "err", s.Error, "output", s.Output)
	}
	g.events.publish(EventSetup, d, summary)
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// machineUp starts watching a live machine and tells the observer. A fresh
// clone also gets its own clock and identity, in the background so the
// create returns as soon as the screen is back. When the desktop asked for
// a clock (start), the guest's clock is set to it and the returned channel
// says how that went, so the caller can wait for it; it is nil otherwise.
func (m *Manager) machineUp(e *entry, mach Machine, personalize bool, start *time.Time) <-chan clockSet {
	d := e.snapshot()
	if m.obs != nil {
		m.obs.MachineUp(d.ID, mach)
	}
	go m.watch(e, mach)
	// The channel of this machine: a wake while this one's setup runs
	// makes a new one, which only the woken machine's goroutine closes.
	e.mu.Lock()
	ready := e.guest.ready
	e.mu.Unlock()
	if !personalize {
		closeReady(e, ready)
		return nil
	}
	return m.setup.setUpGuest(e, mach, start, ready)
}

// setUpGuest sets a fresh machine's guest clock and identity in the
// background, then runs its on_create commands, and closes ready when
// done. The record's GuestPending is cleared once clock and identity are
// set, so a restart before then sets them again.
func (g *guestSetup) setUpGuest(e *entry, mach Machine, start *time.Time, ready guestReady) <-chan clockSet {
	d := e.snapshot()
	var set chan clockSet
	if start != nil {
		set = make(chan clockSet, 1)
	}
	e.mu.Lock()
	e.guest.settingFor = mach
	e.mu.Unlock()
	go func() {
		defer closeReady(e, ready)
		defer func() {
			e.mu.Lock()
			if e.guest.settingFor == mach {
				e.guest.settingFor = nil
			}
			e.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(g.base, time.Minute)
		defer cancel()
		hostNow := g.now()
		guestNow := hostNow.Add(d.ClockOffset)
		if start != nil {
			guestNow = *start
		}
		err := SetTime(ctx, mach.Agent(), guestNow)
		if set != nil {
			set <- clockSet{offset: guestNow.Sub(hostNow), err: err}
		}
		if err == nil {
			err = SetIdentity(ctx, mach.Agent(), d.ID, machineID(d.ID))
		}
		closeOwn(e, ready)
		if err != nil {
			// Deleted or hibernated meanwhile: nothing to report. The agent's
			// connection may close before the process is seen to exit.
			e.mu.Lock()
			ending := e.expectExit
			e.mu.Unlock()
			select {
			case <-mach.Exited():
			default:
				if !ending {
					g.log.Warn("guest clock and identity not set", "desktop", d.ID, "err", err)
					if cmds := takeOnCreate(e); len(cmds) > 0 {
						g.runSetup(g.base, e, mach, cmds, err)
					}
				}
			}
			return
		}
		g.guestSetUp(e, mach)
		if cmds := takeOnCreate(e); len(cmds) > 0 {
			g.runSetup(g.base, e, mach, cmds, nil)
		}
	}()
	return set
}

// guestSetUp records that mach's guest has its own clock and identity.
func (g *guestSetup) guestSetUp(e *entry, mach Machine) {
	e.mu.Lock()
	if e.m != mach || !e.d.GuestPending || e.d.State == StateDeleted || e.d.State == StateStopping {
		e.mu.Unlock()
		return
	}
	e.d.GuestPending = false
	d := e.d
	e.mu.Unlock()
	if err := g.putBeside(e, d); err != nil {
		g.log.Error("record that a guest's clock and identity are set", "desktop", d.ID, "err", err)
	}
}

// putBeside writes d, a copy of e's desktop taken by work that runs
// beside the desktop's operations (its guest's set-up, its on_create
// commands). An operation's own record written just before would be
// undone by it (a pause, or a delete bringing the record back), so the
// record is checked against the desktop afterwards and written again (or
// deleted) if they differ. The entry's lock is not held across the write:
// a fleet's store may take a while.
func (g *guestSetup) putBeside(e *entry, d Desktop) error {
	if err := g.store.PutDesktop(d); err != nil {
		return err
	}
	now := e.snapshot()
	switch {
	case now.State == StateDeleted:
		return g.store.DeleteDesktop(now.ID)
	case !reflect.DeepEqual(now, d):
		return g.store.PutDesktop(now)
	}
	return nil
}

// finishGuestSetUp sets the clock and identity of a resumed desktop whose
// guest never got them (a pause or a restart of hostd cut that short).
// Callers that wait for its guest wait for that too.
func (g *guestSetup) finishGuestSetUp(e *entry) {
	e.mu.Lock()
	mach := e.m
	if !e.d.GuestPending || mach == nil || e.guest.settingFor == mach || e.d.State != StateRunning {
		e.mu.Unlock()
		return
	}
	e.guest.settingFor = mach // in this critical section: two resumes start one
	e.guest.ready = newGuestReady()
	ready := e.guest.ready
	e.mu.Unlock()
	g.setUpGuest(e, mach, nil, ready)
}

// clockSet is how setting a guest's asked-for clock went: the offset of
// the guest's clock from the host's it makes.
type clockSet struct {
	offset time.Duration
	err    error
}

// waitClock waits for the guest's clock to be set to the time a create or
// reset asked for, and records the offset it makes (a wake keeps it).
// Nothing to wait for (set is nil) is success.
func (g *guestSetup) waitClock(ctx context.Context, e *entry, set <-chan clockSet) error {
	if set == nil {
		return nil
	}
	var r clockSet
	select {
	case r = <-set:
	case <-ctx.Done():
		return fmt.Errorf("set the guest's clock: %w", ctx.Err())
	}
	if r.err != nil {
		return r.err
	}
	e.mu.Lock()
	e.d.ClockOffset = r.offset
	d := e.d
	e.mu.Unlock()
	if err := g.store.PutDesktop(d); err != nil {
		return fmt.Errorf("record the guest's clock: %w", err)
	}
	return nil
}

// takeOnCreate returns a new desktop's on_create commands once: a wake
// sets the clock again but does not run them again.
func takeOnCreate(e *entry) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	cmds := e.guest.onCreate
	e.guest.onCreate = nil
	return cmds
}

// guestReady closes its channels as a fresh machine's guest set-up goes
// (or gives up): Manager.Machine's waits.
type guestReady struct {
	own  chan struct{} // the guest has its own clock and identity
	done chan struct{} // and has run its snapshot's on_create commands
}

func newGuestReady() guestReady {
	return guestReady{own: make(chan struct{}), done: make(chan struct{})}
}

// closeOwn closes ready's first channel once.
func closeOwn(e *entry, ready guestReady) {
	e.mu.Lock()
	defer e.mu.Unlock()
	closeOnce(ready.own)
}

// closeReady closes both of ready's channels once.
func closeReady(e *entry, ready guestReady) {
	e.mu.Lock()
	defer e.mu.Unlock()
	closeOnce(ready.own)
	closeOnce(ready.done)
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// machineID derives a machine-id (32 hex digits) from the desktop id.
func machineID(id string) string {
	sum := sha256.Sum256([]byte("warmdesk machine-id " + id))
	return hex.EncodeToString(sum[:16])
}
