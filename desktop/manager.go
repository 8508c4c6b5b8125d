// The Manager and what every part of it shares: the table of desktops,
// their entries, and the lookups.
//
// Lock order, outer first; a lock is never taken while one after it is
// held:
//
//	entry.op → Lineage.gcMu → pools.mu → capacity.mu → Manager.mu → entry.mu
//
// No part takes an entry's op lock while it holds any other of these.
// Fork, Wake and Reset reserve capacity before taking op; Delete holds op
// while it collects fork templates.

package desktop

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/volume"
)

// Store keeps the Manager's records of desktops so that they survive a
// restart of hostd. hostd/store implements it over bbolt.
type Store interface {
	LoadDesktops() ([]Desktop, error)
	PutDesktop(d Desktop) error
	DeleteDesktop(id string) error
}

// Observer hears when a desktop's machine becomes live and when it goes, so
// that hostd can attach what serves it (the screen mirror) and detach it.
type Observer interface {
	MachineUp(id string, m Machine)
	MachineDown(id string)
	// Forget: the desktop is deleted.
	Forget(id string)
}

// Observers hear as one: each in order.
type Observers []Observer

// MachineUp tells each observer.
func (os Observers) MachineUp(id string, m Machine) {
	for _, o := range os {
		o.MachineUp(id, m)
	}
}

// MachineDown tells each observer.
func (os Observers) MachineDown(id string) {
	for _, o := range os {
		o.MachineDown(id)
	}
}

// Forget tells each observer.
func (os Observers) Forget(id string) {
	for _, o := range os {
		o.Forget(id)
	}
}

// Manager owns every desktop's lifetime: creation from snapshots, the state
// machine, TTLs, caps, and recovery after restarts. A desktop's machine
// lives as long as the Manager says, never as long as a request.
type Manager struct {
	drv     Driver
	store   Store
	catalog *Catalog
	log     *slog.Logger
	obs     Observer
	events  *Events
	now     func() time.Time
	// setup sets guests up after their restores.
	setup *guestSetup
	// capacity holds the caps and admits what would take resources.
	capacity capacity
	cpu      *CPUAdmission
	// drivenFor is Config.DrivenFor.
	drivenFor time.Duration

	// base is the context machines are started and stopped under.
	base context.Context

	// closed ends the watchers when this Manager is closed (hostd stops;
	// its machines keep running for the next hostd).
	closed    chan struct{}
	closeOnce sync.Once

	// lineage makes snapshots, forks and resets, collects fork templates
	// and runs the warm pools; what it holds is guarded by mu.
	lineage *Lineage
	// vols lends volumes; its claims are guarded by mu.
	vols *Volumes

	mu       sync.Mutex
	desktops map[string]*entry
	ttlKick  chan struct{}
}

// entry is one desktop: its record, its machine while live, and a lock that
// serialises operations on it.
type entry struct {
	op sync.Mutex // held for the whole of an operation on this desktop

	mu sync.Mutex // guards d and m
	d  Desktop
	m  Machine
	// expectExit is set while an operation (hibernate, delete) ends the
	// machine on purpose, so the watcher does not call it a failure.
	expectExit bool
	// guest is where its guest's set-up stands.
	guest guestState
	// inUse counts the requests using the desktop now (Manager.Use);
	// savedExpiry is the ExpiresAt its record last had written by the TTL
	// sweeper, which writes a moved one at most a minute behind.
	inUse       int
	savedExpiry time.Time
	// prio is the machine's CPU share by use (priority.go).
	prio usePriority
	// hold, while a move sends the desktop's state, is closed when the
	// move ends: requests wait on it (Moves.Hold).
	hold chan struct{}
}

// guestState is where a desktop's guest set-up stands, guarded by the
// entry's mu.
type guestState struct {
	// ready says how far the guest's set-up has gone.
	ready guestReady
	// onCreate are the commands a new desktop runs once restored.
	onCreate []string
	// settingFor is the machine whose guest's clock and identity a
	// goroutine is setting, so a resume does not start a second.
	settingFor Machine
}

func (e *entry) snapshot() Desktop {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.d
}

// Config wires a Manager.
type Config struct {
	Driver   Driver
	Store    Store
	Catalog  *Catalog
	Logger   *slog.Logger
	Limits   Limits
	Observer Observer
	// FreeSpace reports the bytes free on the disk of the state directory
	// (records, snapshots, desktops' disks); nil: not checked.
	FreeSpace func() (uint64, error)
	// DrivenFor is how long a desktop keeps the driven CPU share after its
	// last request (0: the package's DrivenFor).
	DrivenFor time.Duration
	// CPU admits creates, forks and wakes by the host's CPU pressure
	// (NewCPUAdmission); nil: no admission by CPU.
	CPU *CPUAdmission
	// Volumes keeps the host's volumes; nil: volumes are refused.
	Volumes *volume.Registry
}

// NewManager returns a Manager. Call Recover before serving, and Run for
// TTL expiry.
func NewManager(ctx context.Context, c Config) *Manager {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits()
	}
	m := &Manager{
		drv: c.Driver, store: c.Store, catalog: c.Catalog, log: c.Logger, obs: c.Observer,
		now: time.Now, base: context.WithoutCancel(ctx),
		desktops: map[string]*entry{}, ttlKick: make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	m.capacity = capacity{limits: c.Limits, freeSpace: c.FreeSpace, holding: m.holding}
	m.cpu = c.CPU
	m.drivenFor = cmp.Or(c.DrivenFor, DrivenFor)
	m.events = &Events{get: m.Get, now: m.now}
	m.vols = &Volumes{m: m, reg: c.Volumes, claims: map[string][]volume.Holder{}}
	w, _ := c.Driver.(Warmer)
	m.lineage = &Lineage{m: m, held: map[string]int{},
		pools: pools{drv: c.Driver, w: w, size: c.Limits.PoolSize, catalog: c.Catalog, log: c.Logger, closed: m.closed}}
	m.setup = &guestSetup{base: m.base, log: m.log, now: m.now, store: m.store, events: m.events}
	return m
}

// Close stops watching machines. They keep running: a later Manager (the
// next hostd) finds them through Recover.
func (m *Manager) Close() {
	m.closeOnce.Do(func() { close(m.closed) })
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.desktops, id)
	m.mu.Unlock()
}

func (m *Manager) publish(t EventType, d Desktop) {
	m.events.publish(t, d, "")
}

// Events is the stream of the desktops' events.
func (m *Manager) Events() *Events { return m.events }

// Volumes lends the host's volumes to desktops and to the host.
func (m *Manager) Volumes() *Volumes { return m.vols }

// Lineage makes snapshots, forks and resets, and keeps the snapshot
// catalog and the warm pools.
func (m *Manager) Lineage() *Lineage { return m.lineage }

func (m *Manager) lookup(id string) (*entry, error) {
	m.mu.Lock()
	e, ok := m.desktops[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: desktop %q", ErrNotFound, id)
	}
	return e, nil
}

// Get returns a desktop by id.
func (m *Manager) Get(id string) (Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	return e.snapshot(), nil
}

// List returns every desktop, oldest first.
func (m *Manager) List() []Desktop {
	m.mu.Lock()
	out := make([]Desktop, 0, len(m.desktops))
	for _, e := range m.desktops {
		out = append(out, e.snapshot())
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Wait is how far a fresh machine's guest set-up must have gone before
// Machine returns it.
type Wait int

const (
	// WaitNone returns the machine as it is (screens, monitors).
	WaitNone Wait = iota
	// WaitIdentity waits until the guest has its own clock and identity:
	// input typed while the guest's clock jumped from the template's lost
	// its first keys under load (a line typed right after a create).
	WaitIdentity
	// WaitSetUp also waits for the snapshot's on_create commands, so
	// guest commands never see the template's state.
	WaitSetUp
)

// Machine returns a desktop's live machine, for input, screen and guest
// access. It fails with ErrConflict when the desktop is not live. It first
// waits (up to ctx) for the guest's set-up to have gone as far as wait.
func (m *Manager) Machine(ctx context.Context, id string, wait Wait) (Machine, Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return nil, Desktop{}, err
	}
	e.mu.Lock()
	mach, d, ready := e.m, e.d, e.guest.ready
	e.mu.Unlock()
	if mach == nil || !d.State.Live() {
		return nil, d, &TransitionError{ID: id, From: d.State, Action: "use"}
	}
	var until <-chan struct{}
	switch wait {
	case WaitIdentity:
		until = ready.own
	case WaitSetUp:
		until = ready.done
	}
	if until != nil {
		select {
		case <-until:
		case <-ctx.Done():
			return nil, d, fmt.Errorf("%w: the guest of %s is still starting: %w", ErrUnavailable, id, ctx.Err())
		}
	}
	return mach, d, nil
}

// Use records that a request uses a desktop now, and returns what the
// request calls when it is done. A desktop with a TTL ends that long after
// its last use, and never while a request on it runs.
func (m *Manager) Use(id string) (done func()) {
	e, err := m.lookup(id)
	if err != nil {
		return func() {}
	}
	// A request that reaches here while a move sends the desktop's state
	// waits for the move's end: the move waits only for the uses counted
	// before it began (checked and counted under one lock).
	for gate := m.used(e, 1); gate != nil; gate = m.used(e, 1) {
		<-gate
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.used(e, -1)
			m.kickTTL() // an end the request held off may be due now
		})
	}
}

// used counts a request in or out of e and moves its TTL's end. A request
// in is not counted while a move holds the desktop's requests: used then
// returns the move's gate, to wait on.
func (m *Manager) used(e *entry, delta int) (held <-chan struct{}) {
	now := m.now().UTC()
	e.mu.Lock()
	defer e.mu.Unlock()
	if delta > 0 && e.hold != nil {
		return e.hold
	}
	e.inUse += delta
	m.prioritize(e)
	e.d.LastUsedAt = now
	if e.d.TTL > 0 && e.d.ExpiresAt != nil {
		if end := now.Add(e.d.TTL); end.After(*e.d.ExpiresAt) {
			e.d.ExpiresAt = &end
		}
	}
	return nil
}
