package desktoptest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Harness is what the conformance suite needs from a driver under test.
type Harness struct {
	// NewDriver returns a driver. Every check gets a new one (the suite
	// closes it at the check's end when it has a Close method), and the
	// restart check asks for another to play a restart of hostd: the new
	// driver must find the old one's machines.
	NewDriver func(t *testing.T) desktop.Driver
	// Catalog holds Snapshot, a golden snapshot the driver can restore.
	Catalog  *desktop.Catalog
	Snapshot string
	// NewStore returns an empty records store; every check gets its own.
	NewStore func(t *testing.T) desktop.Store
	// Kill ends a machine's process abruptly (SIGKILL for real drivers).
	Kill func(t *testing.T, m desktop.Machine)
	// Gone reports whether everything a machine record owned is gone
	// (process and files).
	Gone func(t *testing.T, record []byte) bool
	// Running, when set, names the machines the drivers under test run
	// right now (processes, domains): every check must end with none, and
	// with as many as live desktops while it runs.
	Running func(t *testing.T) []string
	// GuestOS says the machines run warmdesk's guest image, whose agent
	// runs programs (guest-exec of a shell). The checks that look inside
	// the guest (randomness, clock and identity of clones) need it; the
	// fake driver has no guest and skips them, saying so.
	GuestOS bool
	// SmallDir, when set, returns a directory on a new filesystem of 64 MiB
	// that the driver's machines reach by the same path, gone when the test
	// ends. nil: the suite mounts a tmpfs itself (as root), which serves
	// when the machines share this process's mount namespace.
	SmallDir func(t *testing.T) string
	// Timeout bounds each operation; real drivers under TCG need minutes.
	Timeout time.Duration
	// Logger is optional.
	Logger *slog.Logger
}

// check is one conformance check.
type check struct {
	name string
	run  func(t *testing.T, h Harness)
}

// checks are the suite, in the order they run. Each starts from nothing:
// a new driver, store and Manager, and must leave nothing behind.
var checks = []check{
	{"CreateWithoutPool", createWithoutPool},
	{"CreateFromPool", createFromPool},
	{"PauseResume", pauseResume},
	{"HibernateWake", hibernateWake},
	{"ResetToSnapshot", resetToSnapshot},
	{"Fork3", fork3},
	{"ForkPausedTwice", forkPausedTwice},
	{"SnapshotThenCreate", snapshotThenCreate},
	{"SnapshotOnFullDiskFailsCleanly", snapshotOnFullDisk},
	{"CapacityRefusedWhole", capacity},
	{"KilledMachineFails", killed},
	{"RestartFindsDesktops", restart},
	{"RestartEndsUnrecordedMachines", restartSweeps},
	{"RestartResumesAStoppedDesktop", restartResumes},
	{"ConcurrentMixedCalls", concurrentMixedCalls},
	{"InputReachesMachine", inputReachesMachine},
	{"GuestAgentAnswers", guestAgentAnswers},
	{"VNCServesRFB", vncServesRFB},
	{"ClonesOwnRandomnessClockIdentity", clonesOwnRandomnessClockIdentity},
}

// Run runs the conformance suite: every check through a Manager of its
// own on a driver and store of its own.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// env is one check's world: a driver, a store and a Manager on them.
type env struct {
	h       Harness
	catalog *desktop.Catalog
	limits  desktop.Limits
	store   desktop.Store
	drv     desktop.Driver
	mgr     *desktop.Manager
	// before is what Harness.Running named when the check began: a check
	// answers only for machines it started.
	before map[string]bool
	// made are the desktops this check's Managers created: it answers only
	// for fork templates of those (other packages' tests share the catalog).
	mu    sync.Mutex
	made  map[string]bool
	stops []func()
}

// open starts a check's env on the harness's catalog with default limits;
// at the check's end it checks that nothing is left and tidies up.
func open(t *testing.T, h Harness) *env {
	return openWith(t, h, h.Catalog, desktop.DefaultLimits())
}

func openWith(t *testing.T, h Harness, cat *desktop.Catalog, limits desktop.Limits) *env {
	t.Helper()
	e := &env{h: h, catalog: cat, limits: limits, store: h.NewStore(t), before: map[string]bool{}, made: map[string]bool{}}
	if h.Running != nil {
		for _, name := range h.Running(t) {
			e.before[name] = true
		}
	}
	e.drv = h.NewDriver(t)
	e.mgr = e.newManager(t)
	t.Cleanup(func() { e.finish(t) })
	return e
}

func (e *env) newManager(t *testing.T) *desktop.Manager {
	t.Helper()
	m := desktop.NewManager(context.Background(), desktop.Config{
		Driver: e.drv, Store: e.store, Catalog: e.catalog, Logger: e.h.Logger, Limits: e.limits,
	})
	events, stop := m.Events().Subscribe()
	e.mu.Lock()
	e.stops = append(e.stops, stop)
	e.mu.Unlock()
	go func() {
		for ev := range events {
			if ev.Type == desktop.EventCreated {
				e.mu.Lock()
				e.made[ev.Desktop.ID] = true
				e.mu.Unlock()
			}
		}
	}()
	if err := m.Recover(e.ctx(t)); err != nil {
		t.Fatalf("recover: %v", err)
	}
	return m
}

// restart plays a restart of hostd: the Manager and driver go (desktops
// keep running), a new driver and Manager start on the same store.
func (e *env) restart(t *testing.T) {
	t.Helper()
	e.mgr.Close()
	closeDriver(e.drv)
	e.drv = e.h.NewDriver(t)
	e.mgr = e.newManager(t)
}

func closeDriver(d desktop.Driver) {
	if c, ok := d.(interface{ Close() }); ok {
		c.Close()
	}
}

// finish checks that a check that passed removed every desktop it made,
// deletes whatever a failed one left, and checks that no machine remains.
func (e *env) finish(t *testing.T) {
	passed := !t.Failed()
	ctx, cancel := context.WithTimeout(context.Background(), e.h.Timeout)
	defer cancel()
	if passed {
		if left := e.mgr.List(); len(left) > 0 {
			t.Errorf("the check left %d desktops: %v", len(left), describeAll(left))
		}
		if records, _ := e.store.LoadDesktops(); len(records) > 0 {
			t.Errorf("the check left %d records: %v", len(records), describeAll(records))
		}
	}
	for _, d := range e.mgr.List() {
		if err := e.mgr.Delete(ctx, d.ID); err != nil {
			t.Errorf("tidying up: delete %s: %v", Describe(d), err)
		}
	}
	e.mgr.Close()
	closeDriver(e.drv)
	e.mu.Lock()
	for _, stop := range e.stops {
		stop()
	}
	e.mu.Unlock()
	if passed {
		snaps, _, _ := e.catalog.List()
		for _, sn := range snaps {
			e.mu.Lock()
			ours := e.made[sn.Manifest.Source]
			e.mu.Unlock()
			if sn.Manifest.Ephemeral && ours {
				t.Errorf("fork template %s remains", sn.Name)
			}
		}
	}
	if e.h.Running != nil {
		var left []string
		for _, name := range e.h.Running(t) {
			if !e.before[name] {
				left = append(left, name)
			}
		}
		if len(left) > 0 {
			t.Errorf("machines the check started still run: %v", left)
		}
	}
}

func (e *env) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), e.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) create(t *testing.T) desktop.Desktop {
	t.Helper()
	d, err := e.mgr.Create(e.ctx(t), desktop.CreateRequest{Snapshot: e.h.Snapshot})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if d.State != desktop.StateRunning {
		t.Fatalf("created desktop is %s, want running", d.State)
	}
	return d
}

func (e *env) remove(t *testing.T, id string) {
	t.Helper()
	if err := e.mgr.Delete(e.ctx(t), id); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
	if _, err := e.mgr.Get(id); !errors.Is(err, desktop.ErrNotFound) {
		t.Fatalf("after delete, get %s: %v, want ErrNotFound", id, err)
	}
}

func (e *env) machine(t *testing.T, id string) desktop.Machine {
	t.Helper()
	m, _, err := e.mgr.Machine(e.ctx(t), id, desktop.WaitNone)
	if err != nil {
		t.Fatalf("machine of %s: %v", id, err)
	}
	return m
}

// screenOK checks the desktop's machine answers with a non-blank screen.
func (e *env) screenOK(t *testing.T, id string) {
	t.Helper()
	img, err := e.machine(t, id).Screendump(e.ctx(t))
	if err != nil {
		t.Fatalf("screendump %s: %v", id, err)
	}
	if desktop.BlankScreen(img) {
		t.Fatalf("desktop %s shows a blank screen", id)
	}
}

// Describe formats a desktop for failure messages.
func Describe(d desktop.Desktop) string {
	return fmt.Sprintf("%s (%s, %s)", d.ID, d.State, d.Reason)
}

func describeAll(ds []desktop.Desktop) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, Describe(d))
	}
	return out
}

// waitFor calls cond until it holds or ctx ends, backing off from 20 ms to
// 1 s. It is for what a guest does on its own time, which gives no signal
// to wait on.
func waitFor(ctx context.Context, cond func() bool) bool {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if cond() {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return cond()
		}
	}
}
