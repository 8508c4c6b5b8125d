package desktop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/internal/fanout"
	"github.com/warmdesk/warmdesk/netpolicy"
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

// Limits are the host-wide caps and the ranges of per-desktop values.
type Limits struct {
	MaxDesktops  int           // desktops holding resources (creating, running, paused)
	MaxMemoryMiB int           // sum of their guest memory
	MaxFork      int           // copies per fork call
	MaxTTL       time.Duration // longest TTL a desktop may ask for
	MaxDiskMiB   int           // largest per-desktop disk growth
	PoolSize     int           // machines restored ahead per snapshot, for drivers that pool
	// MinFreeMiB is the free space (Config.FreeSpace) below which creates,
	// forks, wakes and snapshots are refused: a disk filled by desktops
	// would leave the records store unable to write.
	MinFreeMiB int
}

// DefaultLimits are conservative caps for a small host.
func DefaultLimits() Limits {
	return Limits{MaxDesktops: 32, MaxMemoryMiB: 32 << 10, MaxFork: 10, MaxTTL: 7 * 24 * time.Hour, MaxDiskMiB: 64 << 10, PoolSize: 2, MinFreeMiB: 2048}
}

// Manager owns every desktop's lifetime: creation from snapshots, the state
// machine, TTLs, caps, and recovery after restarts. A desktop's machine
// lives as long as the Manager says, never as long as a request.
type Manager struct {
	drv     Driver
	store   Store
	catalog *Catalog
	log     *slog.Logger
	limits  Limits
	obs     Observer
	events  *fanout.Broker[Event]
	// freeSpace is Config.FreeSpace.
	freeSpace func() (uint64, error)
	now       func() time.Time

	// base is the context machines are started and stopped under.
	base context.Context

	// closed ends the watchers when this Manager is closed (hostd stops;
	// its machines keep running for the next hostd).
	closed    chan struct{}
	closeOnce sync.Once

	// gcMu serialises the removal of unused fork templates, so two desktops
	// deleted at once cannot each see the other as a user and both skip it.
	gcMu sync.Mutex

	// poolMu guards pooled, the snapshots whose warm pools run.
	poolMu sync.Mutex
	pooled map[string]Snapshot

	mu       sync.Mutex
	desktops map[string]*entry
	held     map[string]int // snapshots a fork in flight holds
	reserved int            // memory MiB of creates in flight
	// vols is the volume registry; claims are the holds of attaches and
	// archives in flight, by volume, beside the desktops' records.
	vols    *volume.Registry
	claims  map[string][]volume.Holder
	pending int // creates in flight
	ttlKick chan struct{}
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
	// guestReady closes once the guest has its own clock and identity,
	// and has run its snapshot's on_create commands.
	guestReady chan struct{}
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
	return &Manager{
		drv: c.Driver, store: c.Store, catalog: c.Catalog, log: c.Logger, limits: c.Limits, obs: c.Observer, freeSpace: c.FreeSpace,
		vols: c.Volumes, claims: map[string][]volume.Holder{},
		events: &fanout.Broker[Event]{}, now: time.Now, base: context.WithoutCancel(ctx),
		desktops: map[string]*entry{}, ttlKick: make(chan struct{}, 1), held: map[string]int{},
		closed: make(chan struct{}),
	}
}

// Close stops watching machines. They keep running: a later Manager (the
// next hostd) finds them through Recover.
func (m *Manager) Close() {
	m.closeOnce.Do(func() { close(m.closed) })
}

// Driver is the driver desktops run on.
func (m *Manager) Driver() Driver { return m.drv }

// Catalog is the snapshot catalog.
func (m *Manager) Catalog() *Catalog { return m.catalog }

// Limits are the caps in force.
func (m *Manager) Limits() Limits { return m.limits }

// CreateRequest asks for a new desktop.
type CreateRequest struct {
	Snapshot string        `json:"snapshot"`
	Name     string        `json:"name,omitempty"`
	TTL      time.Duration `json:"ttl,omitempty"`
	// Network is the egress policy (mode none, the default, reaches
	// nothing); it can change while the desktop lives (SetNetwork).
	Network netpolicy.Policy `json:"network"`
	// CPUs and MemoryMiB, when given, must equal the snapshot's: a memory
	// image restores only into a machine of its own shape.
	CPUs      int `json:"cpus,omitempty"`
	MemoryMiB int `json:"memory_mib,omitempty"`
	DiskMiB   int `json:"disk_mib,omitempty"`
	// Volumes are attached and mounted before the create returns.
	Volumes []volume.Mount `json:"volumes,omitempty"`
	// Clock, when set, is the guest's wall-clock time the create returns
	// with; the guest's clock then runs on from it, across wakes too.
	Clock *time.Time `json:"clock,omitempty"`
	// Labels are the caller's own key-value pairs, kept with the record
	// (E2B's metadata); Env is set for every command the guest runs for a
	// front door that honours it (E2B's envVars).
	Labels map[string]string `json:"labels,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
}

// Bounds of a desktop's labels and environment.
const (
	maxLabels     = 64
	maxLabelBytes = 4096
)

// checkPairs checks labels or environment variables: a bounded number of
// short pairs, and for env, names a shell accepts.
func checkPairs(field string, m map[string]string, envNames bool) error {
	if len(m) > maxLabels {
		return fmt.Errorf("%w: %s: %d entries, at most %d", ErrInvalid, field, len(m), maxLabels)
	}
	for k, v := range m {
		switch {
		case k == "" || len(k) > maxLabelBytes || len(v) > maxLabelBytes:
			return fmt.Errorf("%w: %s.%.40q: keys of 1 to %d bytes, values of at most %d", ErrInvalid, field, k, maxLabelBytes, maxLabelBytes)
		case strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0):
			return fmt.Errorf("%w: %s.%.40q: contains a NUL byte", ErrInvalid, field, k)
		case envNames && !validEnvName(k):
			return fmt.Errorf("%w: %s.%.40q: not a variable name (letters, digits and _, not starting with a digit)", ErrInvalid, field, k)
		}
	}
	return nil
}

func validEnvName(k string) bool {
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return k != ""
}

func (m *Manager) validate(req CreateRequest, snap Snapshot) error {
	shape := snap.Manifest.Machine
	if len(snap.Manifest.VolumeSlots) > 0 {
		return fmt.Errorf("%w: snapshot %s is a fork's template holding its desktop's volumes: only that fork's copies restore from it; fork the desktop instead", ErrInvalid, snap.Name)
	}
	if err := CheckNetwork(req.Network); err != nil {
		return err
	}
	if err := checkPairs("labels", req.Labels, false); err != nil {
		return err
	}
	if err := checkPairs("env", req.Env, true); err != nil {
		return err
	}
	switch {
	case req.Name != "":
		if err := ValidName("desktop", req.Name); err != nil {
			return err
		}
	}
	if req.TTL < 0 || req.TTL > m.limits.MaxTTL {
		return fmt.Errorf("%w: ttl %s: use 0 (none) up to %s", ErrInvalid, req.TTL, m.limits.MaxTTL)
	}
	if req.TTL > 0 && req.TTL < time.Minute {
		return fmt.Errorf("%w: ttl %s: use at least 1m", ErrInvalid, req.TTL)
	}
	if req.CPUs != 0 && req.CPUs != shape.CPUs {
		return fmt.Errorf("%w: cpus %d: snapshot %s was baked with %d CPUs, and a restore keeps them; bake another snapshot with --cpus %d", ErrInvalid, req.CPUs, snap.Name, shape.CPUs, req.CPUs)
	}
	if req.MemoryMiB != 0 && req.MemoryMiB != shape.MemoryMiB {
		return fmt.Errorf("%w: memory_mib %d: snapshot %s was baked with %d MiB, and a restore keeps it; bake another snapshot with --memory %dMiB", ErrInvalid, req.MemoryMiB, snap.Name, shape.MemoryMiB, req.MemoryMiB)
	}
	if req.DiskMiB < 0 || req.DiskMiB > m.limits.MaxDiskMiB {
		return fmt.Errorf("%w: disk_mib %d: use 0 (no limit) up to %d", ErrInvalid, req.DiskMiB, m.limits.MaxDiskMiB)
	}
	return CheckClock(req.Clock)
}

// The guest clocks a create or reset may ask for: the years a 64-bit
// Linux guest and its RTC both hold.
var (
	earliestClock = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	latestClock   = time.Date(2199, 12, 31, 23, 59, 59, 0, time.UTC)
)

// CheckClock checks an asked-for guest clock (nil: the host's).
func CheckClock(c *time.Time) error {
	if c != nil && (c.Before(earliestClock) || c.After(latestClock)) {
		return fmt.Errorf("%w: clock %s: use a time from %d to %d, in RFC 3339 (\"2026-01-01T09:00:00Z\")", ErrInvalid, c.Format(time.RFC3339), earliestClock.Year(), latestClock.Year())
	}
	return nil
}

// checkSpace refuses an action that writes desktop or snapshot files when
// the state directory's disk is below the free-space reserve.
func (m *Manager) checkSpace(action string) error {
	if m.freeSpace == nil || m.limits.MinFreeMiB <= 0 {
		return nil
	}
	free, err := m.freeSpace()
	if err != nil {
		return fmt.Errorf("%s: free space: %w", action, err)
	}
	if free < uint64(m.limits.MinFreeMiB)<<20 {
		return fmt.Errorf("%w: %s: %d MiB are free on the state directory's disk, below the reserve of %d MiB; delete desktops or snapshots, or lower --min-free-mib", ErrNoSpace, action, free>>20, m.limits.MinFreeMiB)
	}
	return nil
}

// reserve claims room for n desktops of memMiB each under the host caps.
func (m *Manager) reserve(n, memMiB int) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	count, mem := m.pending, m.reserved
	for _, e := range m.desktops {
		d := e.snapshot()
		if d.State.Holds() {
			count++
			mem += d.Resources.MemoryMiB
		}
	}
	if count+n > m.limits.MaxDesktops {
		return nil, fmt.Errorf("%w: %d desktops hold resources and the host cap is %d; delete or hibernate some, or raise --max-desktops", ErrCapacity, count, m.limits.MaxDesktops)
	}
	if mem+n*memMiB > m.limits.MaxMemoryMiB {
		return nil, fmt.Errorf("%w: desktops hold %d MiB of guest memory, %d more would pass the host cap of %d MiB; delete or hibernate some, or raise --max-memory", ErrCapacity, mem, n*memMiB, m.limits.MaxMemoryMiB)
	}
	m.pending += n
	m.reserved += n * memMiB
	released := false
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !released {
			released = true
			m.pending -= n
			m.reserved -= n * memMiB
		}
	}, nil
}

// reserveComeback reserves room for a desktop that holds nothing now
// (hibernated, failed) and is about to run again, as a create would; one
// that holds its room already needs nothing more.
func (m *Manager) reserveComeback(d Desktop, action string) (release func(), err error) {
	if d.State.Holds() {
		return func() {}, nil
	}
	if err := m.checkSpace(action); err != nil {
		return nil, err
	}
	release, err = m.reserve(1, d.Resources.MemoryMiB)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, d.ID, err)
	}
	return release, nil
}

// snapshotFor finds and checks the snapshot a create restores from.
func (m *Manager) snapshotFor(name string) (Snapshot, error) {
	if name == "" {
		return Snapshot{}, fmt.Errorf("%w: snapshot: required (see GET /v1/snapshots)", ErrInvalid)
	}
	snap, err := m.catalog.Get(name)
	if err != nil {
		return Snapshot{}, err
	}
	if err := m.catalog.Verify(snap); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// Create restores a new desktop from a snapshot and returns it running.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Desktop, error) {
	snap, err := m.snapshotFor(req.Snapshot)
	if err != nil {
		return Desktop{}, err
	}
	if err := m.validate(req, snap); err != nil {
		return Desktop{}, err
	}
	if err := m.checkSpace("create"); err != nil {
		return Desktop{}, err
	}
	release, err := m.reserve(1, snap.Manifest.Machine.MemoryMiB)
	if err != nil {
		return Desktop{}, err
	}
	defer release()
	MarkPhase(ctx, "checked")
	return m.create(ctx, req, snap, createPlan{})
}

// createPlan is what a fork's copy brings to create: its source, its id
// (chosen before, to name its volume branches), and the volumes the
// snapshot's state already holds, mounted.
type createPlan struct {
	forkOf  string
	id      string
	inState []volume.Mount
	disks   []VolumeDisk
	// clockOffset is the source's guest clock offset from the host's.
	clockOffset time.Duration
}

// create restores one desktop; the caller holds its reservation.
func (m *Manager) create(ctx context.Context, req CreateRequest, snap Snapshot, plan createPlan) (Desktop, error) {
	now := m.now().UTC()
	forkOf, id := plan.forkOf, plan.id
	if id == "" {
		id = NewID("d-")
	}
	d := Desktop{
		ID: id, Name: req.Name, Snapshot: snap.Name, State: StateCreating, Network: req.Network.Normalized(),
		Resources: Resources{CPUs: snap.Manifest.Machine.CPUs, MemoryMiB: snap.Manifest.Machine.MemoryMiB, DiskMiB: req.DiskMiB},
		CreatedAt: now, LastUsedAt: now, ForkOf: forkOf, Driver: m.drv.Name(),
		Control:      Control{Holder: ControlAgent, Since: now},
		Uses:         m.lineage(snap),
		GuestPending: true,
		Labels:       maps.Clone(req.Labels), Env: maps.Clone(req.Env),
	}
	if d.Name == "" {
		d.Name = id
	}
	if req.TTL > 0 {
		exp := now.Add(req.TTL)
		d.ExpiresAt = &exp
	}
	if req.Clock != nil {
		c := req.Clock.UTC()
		d.Clock, req.Clock = &c, &c
	}
	// A fork's copies keep its source's clock.
	d.ClockOffset = plan.clockOffset
	// A fork copies a desktop that already ran them.
	var onCreate []string
	if forkOf == "" && len(snap.Manifest.OnCreate) > 0 {
		onCreate = snap.Manifest.OnCreate
		d.Setup = &Setup{State: SetupRunning, Commands: len(onCreate)}
	}
	mounts, err := m.checkCreateVolumes(req.Volumes)
	if err != nil {
		return Desktop{}, err
	}
	claims := mounts
	if plan.inState != nil {
		claims = plan.inState
	}
	releaseVolumes, err := m.claimVolumes(id, claims)
	if err != nil {
		return Desktop{}, err
	}
	defer releaseVolumes()
	// The record exists before the machine, so a crash in between leaves
	// something recovery can clean up.
	if err := m.store.PutDesktop(d); err != nil {
		return Desktop{}, fmt.Errorf("create: record: %w", err)
	}
	Fault(FaultCreateRecorded)
	MarkPhase(ctx, "recorded")
	e := &entry{d: d, guestReady: make(chan struct{}), onCreate: onCreate}
	e.op.Lock()
	defer e.op.Unlock()
	m.mu.Lock()
	m.desktops[id] = e
	m.mu.Unlock()

	// The machine belongs to the Manager: a caller that goes away does not
	// abort a restore half-way.
	rctx, cancel := context.WithTimeout(carryPhases(m.base, ctx), 2*time.Minute)
	defer cancel()
	mach, err := m.drv.Restore(rctx, RestoreSpec{ID: id, Snapshot: snap, DiskMiB: req.DiskMiB, Volumes: plan.disks})
	if err != nil {
		m.forget(id)
		m.store.DeleteDesktop(id)
		return Desktop{}, fmt.Errorf("create from %s: %w", snap.Name, err)
	}
	Fault(FaultCreateRestored)
	e.mu.Lock()
	e.m = mach
	e.d.State = StateRunning
	e.d.Machine = mach.Record()
	e.d.Volumes = plan.inState
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		mach.Destroy(context.WithoutCancel(rctx))
		m.forget(id)
		m.store.DeleteDesktop(id)
		return Desktop{}, fmt.Errorf("create: record: %w", err)
	}
	MarkPhase(ctx, "recorded_running")
	// Volumes before the guest's clock and identity: the guest agent
	// runs one command at a time, and setting the clock waits on the RTC
	// (hwclock), which the create need not wait for.
	for _, v := range mounts {
		if err := m.attachLocked(ctx, e, v, false); err != nil {
			m.abandon(e, mach)
			return Desktop{}, fmt.Errorf("create: %w; the desktop was removed", err)
		}
	}
	set := m.machineUp(e, mach, true, req.Clock)
	if err := m.waitClock(ctx, e, set); err != nil {
		m.abandon(e, mach)
		return Desktop{}, fmt.Errorf("create: %w; the desktop was removed", err)
	}
	d = e.snapshot()
	m.publish(EventCreated, d)
	MarkPhase(ctx, "announced")
	m.kickTTL()
	return d, nil
}

// abandon ends a desktop whose create failed after its restore, before
// anything watched its machine, under the op lock its create holds.
func (m *Manager) abandon(e *entry, mach Machine) {
	e.mu.Lock()
	e.expectExit = true
	id := e.d.ID
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	if err := mach.Destroy(ctx); err != nil {
		m.log.Warn("end a desktop whose create failed", "desktop", id, "err", err)
	}
	m.forget(id)
	m.store.DeleteDesktop(id)
}

// lineage lists a snapshot and every snapshot under it (its disk's parents).
func (m *Manager) lineage(s Snapshot) []string {
	out := []string{s.Name}
	seen := map[string]bool{s.Name: true}
	for p := s.Manifest.Parent; p != "" && !seen[p]; {
		seen[p] = true
		out = append(out, p)
		ps, err := m.catalog.Get(p)
		if err != nil {
			break
		}
		p = ps.Manifest.Parent
	}
	return out
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.desktops, id)
	m.mu.Unlock()
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
	ready := e.guestReady
	e.mu.Unlock()
	if !personalize {
		closeReady(e, ready)
		return nil
	}
	return m.setUpGuest(e, mach, start, ready)
}

// setUpGuest sets a fresh machine's guest clock and identity in the
// background, then runs its on_create commands, and closes ready when
// done. The record's GuestPending is cleared once clock and identity are
// set, so a restart before then sets them again.
func (m *Manager) setUpGuest(e *entry, mach Machine, start *time.Time, ready chan struct{}) <-chan clockSet {
	d := e.snapshot()
	var set chan clockSet
	if start != nil {
		set = make(chan clockSet, 1)
	}
	e.mu.Lock()
	e.settingFor = mach
	e.mu.Unlock()
	go func() {
		defer closeReady(e, ready)
		defer func() {
			e.mu.Lock()
			if e.settingFor == mach {
				e.settingFor = nil
			}
			e.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(m.base, time.Minute)
		defer cancel()
		hostNow := m.now()
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
					m.log.Warn("guest clock and identity not set", "desktop", d.ID, "err", err)
					if cmds := takeOnCreate(e); len(cmds) > 0 {
						m.runSetup(m.base, e, mach, cmds, err)
					}
				}
			}
			return
		}
		m.guestSetUp(e, mach)
		if cmds := takeOnCreate(e); len(cmds) > 0 {
			m.runSetup(m.base, e, mach, cmds, nil)
		}
	}()
	return set
}

// guestSetUp records that mach's guest has its own clock and identity.
func (m *Manager) guestSetUp(e *entry, mach Machine) {
	e.mu.Lock()
	if e.m != mach || !e.d.GuestPending || e.d.State == StateDeleted || e.d.State == StateStopping {
		e.mu.Unlock()
		return
	}
	e.d.GuestPending = false
	d := e.d
	e.mu.Unlock()
	if err := m.putBeside(e, d); err != nil {
		m.log.Error("record that a guest's clock and identity are set", "desktop", d.ID, "err", err)
	}
}

// putBeside writes d, a copy of e's desktop taken by work that runs
// beside the desktop's operations (its guest's set-up, its on_create
// commands). An operation's own record written just before would be
// undone by it (a pause, or a delete bringing the record back), so the
// record is checked against the desktop afterwards and written again (or
// deleted) if they differ. The entry's lock is not held across the write:
// a fleet's store may take a while.
func (m *Manager) putBeside(e *entry, d Desktop) error {
	if err := m.store.PutDesktop(d); err != nil {
		return err
	}
	now := e.snapshot()
	switch {
	case now.State == StateDeleted:
		return m.store.DeleteDesktop(now.ID)
	case !reflect.DeepEqual(now, d):
		return m.store.PutDesktop(now)
	}
	return nil
}

// finishGuestSetUp sets the clock and identity of a resumed desktop whose
// guest never got them (a pause or a restart of hostd cut that short).
// Callers that wait for its guest wait for that too.
func (m *Manager) finishGuestSetUp(e *entry) {
	e.mu.Lock()
	mach := e.m
	if !e.d.GuestPending || mach == nil || e.settingFor == mach || e.d.State != StateRunning {
		e.mu.Unlock()
		return
	}
	e.settingFor = mach // in this critical section: two resumes start one
	e.guestReady = make(chan struct{})
	ready := e.guestReady
	e.mu.Unlock()
	m.setUpGuest(e, mach, nil, ready)
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
func (m *Manager) waitClock(ctx context.Context, e *entry, set <-chan clockSet) error {
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
	if err := m.store.PutDesktop(d); err != nil {
		return fmt.Errorf("record the guest's clock: %w", err)
	}
	return nil
}

// takeOnCreate returns a new desktop's on_create commands once: a wake
// sets the clock again but does not run them again.
func takeOnCreate(e *entry) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	cmds := e.onCreate
	e.onCreate = nil
	return cmds
}

// halt records that mach paused its running desktop on its own.
func (m *Manager) halt(e *entry, mach Machine, reason string) {
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	id := e.d.ID
	if e.m != mach || e.d.State != StateRunning {
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// The machine stopped its guest at once; stopped again here, under
	// the op lock, since an operation in between (a snapshot) may have
	// started it again.
	ctx, cancel := context.WithTimeout(m.base, 30*time.Second)
	err := mach.Pause(ctx)
	cancel()
	if err != nil {
		m.log.Error("pause a desktop that halted", "desktop", id, "err", err)
		return
	}
	e.mu.Lock()
	e.d.State = StatePaused
	e.d.Reason = reason
	d := e.d
	e.mu.Unlock()
	m.log.Warn("desktop paused itself", "desktop", d.ID, "reason", reason)
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record a paused desktop", "desktop", d.ID, "err", err)
	}
	m.publish(EventState, d)
}

// closeReady closes a guestReady channel of e once.
func closeReady(e *entry, ready chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-ready:
	default:
		close(ready)
	}
}

// machineID derives a machine-id (32 hex digits) from the desktop id.
func machineID(id string) string {
	sum := sha256.Sum256([]byte("warmdesk machine-id " + id))
	return hex.EncodeToString(sum[:16])
}

// watch notices a machine that ends on its own: the desktop fails with the
// reason and its files are removed at once. A machine that pauses itself
// (a Halter) leaves its desktop paused with the reason.
func (m *Manager) watch(e *entry, mach Machine) {
	var halted <-chan string
	if h, ok := mach.(Halter); ok {
		halted = h.Halted()
	}
	for done := false; !done; {
		select {
		case <-mach.Exited():
			done = true
		case reason := <-halted:
			m.halt(e, mach, reason)
		case <-m.closed:
			return
		}
	}
	select {
	case <-m.closed:
		return
	default:
	}
	e.mu.Lock()
	if e.m != mach || e.expectExit {
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// Another operation may hold op; the failure waits for it.
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	if e.m != mach || e.expectExit {
		e.mu.Unlock()
		return
	}
	e.m = nil
	e.d.State = StateFailed
	e.d.Reason = "its QEMU process " + mach.ExitReason()
	rec := e.d.Machine
	d := e.d
	e.mu.Unlock()
	m.log.Warn("desktop failed", "desktop", d.ID, "reason", d.Reason)
	if m.obs != nil {
		m.obs.MachineDown(d.ID)
	}
	ctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	if err := m.drv.Cleanup(ctx, rec); err != nil {
		m.log.Warn("cleanup of failed desktop", "desktop", d.ID, "err", err)
	}
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record failed desktop", "desktop", d.ID, "err", err)
	}
	m.publish(EventState, d)
}

func (m *Manager) publish(t EventType, d Desktop) {
	m.events.Publish(Event{Type: t, Desktop: d, Time: m.now().UTC()})
}

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

// Machine returns a desktop's live machine, for input, screen and guest
// access. It fails with ErrConflict when the desktop is not live. When
// guest is set it first waits (up to ctx) for the clone's clock and
// identity to be set, so guest commands never see the template's.
func (m *Manager) Machine(ctx context.Context, id string, guest bool) (Machine, Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return nil, Desktop{}, err
	}
	e.mu.Lock()
	mach, d, ready := e.m, e.d, e.guestReady
	e.mu.Unlock()
	if mach == nil || !d.State.Live() {
		return nil, d, &TransitionError{ID: id, From: d.State, Action: "use"}
	}
	if guest {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, d, fmt.Errorf("%w: the guest of %s is still starting: %w", ErrUnavailable, id, ctx.Err())
		}
	}
	return mach, d, nil
}

// Touch records that a desktop was used now.
func (m *Manager) Touch(id string) {
	if e, err := m.lookup(id); err == nil {
		e.mu.Lock()
		e.d.LastUsedAt = m.now().UTC()
		e.mu.Unlock()
	}
}

// SetControl passes control of a desktop's input to an agent or a person.
func (m *Manager) SetControl(id string, holder Controller, by string) (Desktop, error) {
	if holder != ControlAgent && holder != ControlPerson {
		return Desktop{}, fmt.Errorf("%w: control holder %q: use agent or person", ErrInvalid, holder)
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	if holder == ControlAgent {
		by = ""
	}
	changed := e.d.Control.Holder != holder || e.d.Control.By != by
	if changed {
		e.d.Control = Control{Holder: holder, By: by, Since: m.now().UTC()}
	}
	d := e.d
	e.mu.Unlock()
	if changed {
		if err := m.store.PutDesktop(d); err != nil {
			return Desktop{}, fmt.Errorf("record control: %w", err)
		}
		m.publish(EventControl, d)
	}
	return d, nil
}

// SetNetwork replaces a desktop's egress policy. It applies to the guest's
// next connection; a stopped or hibernated desktop keeps it for its wake.
func (m *Manager) SetNetwork(id string, p netpolicy.Policy) (Desktop, error) {
	if err := CheckNetwork(p); err != nil {
		return Desktop{}, err
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	e.d.Network = p.Normalized()
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return Desktop{}, fmt.Errorf("record network policy: %w", err)
	}
	m.publish(EventNetwork, d)
	return d, nil
}

// SetExpiry sets when a desktop is deleted; the zero time means never.
// A time already past deletes it at the TTL sweeper's next turn.
func (m *Manager) SetExpiry(id string, at time.Time) (Desktop, error) {
	if ttl := at.Sub(m.now()); !at.IsZero() && ttl > m.limits.MaxTTL {
		return Desktop{}, fmt.Errorf("%w: expiry %s from now: at most %s", ErrInvalid, ttl.Round(time.Second), m.limits.MaxTTL)
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	if e.d.State == StateStopping || e.d.State == StateDeleted {
		e.mu.Unlock()
		return Desktop{}, fmt.Errorf("%w: desktop %s is being deleted", ErrConflict, id)
	}
	if at.IsZero() {
		e.d.ExpiresAt = nil
	} else {
		at = at.UTC()
		e.d.ExpiresAt = &at
	}
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return Desktop{}, fmt.Errorf("record expiry: %w", err)
	}
	// No event: the state did not change (a desktop.state event would
	// read as one in a recording's action log).
	m.kickTTL()
	return d, nil
}

// CheckNetwork checks an egress policy; the error is ErrInvalid and names
// the entry at fault.
func CheckNetwork(p netpolicy.Policy) error {
	if _, err := netpolicy.Compile(p, nil); err != nil {
		return fmt.Errorf("%w: network.%w", ErrInvalid, err)
	}
	return nil
}

// transition runs op on a desktop under its lock if the state allows the
// move to target, then records the new state.
func (m *Manager) transition(ctx context.Context, id, action string, target State, op func(e *entry) error) (Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	d := e.snapshot()
	if !CanTransition(d.State, target) {
		return d, &TransitionError{ID: id, From: d.State, Action: action}
	}
	if err := op(e); err != nil {
		return e.snapshot(), err
	}
	e.mu.Lock()
	e.d.State = target
	e.d.Reason = ""
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return d, fmt.Errorf("%s: record: %w", action, err)
	}
	m.publish(EventState, d)
	return d, nil
}

// Pause stops a running desktop's CPUs; its memory stays.
func (m *Manager) Pause(ctx context.Context, id string) (Desktop, error) {
	return m.transition(ctx, id, "pause", StatePaused, func(e *entry) error {
		if e.snapshot().State != StateRunning {
			return &TransitionError{ID: id, From: e.snapshot().State, Action: "pause"}
		}
		return e.m.Pause(ctx)
	})
}

// Resume continues a paused desktop.
func (m *Manager) Resume(ctx context.Context, id string) (Desktop, error) {
	d, err := m.transition(ctx, id, "resume", StateRunning, func(e *entry) error {
		if e.snapshot().State != StatePaused {
			return &TransitionError{ID: id, From: e.snapshot().State, Action: "resume"}
		}
		return e.m.Resume(ctx)
	})
	if err == nil {
		if e, lerr := m.lookup(id); lerr == nil {
			m.finishGuestSetUp(e)
		}
	}
	return d, err
}

// Hibernate saves a desktop's whole state to disk and ends its machine.
func (m *Manager) Hibernate(ctx context.Context, id string) (Desktop, error) {
	return m.transition(ctx, id, "hibernate", StateHibernated, func(e *entry) error {
		e.mu.Lock()
		mach := e.m
		e.expectExit = true
		e.mu.Unlock()
		if m.obs != nil {
			m.obs.MachineDown(id)
		}
		rec, err := mach.Hibernate(context.WithoutCancel(ctx))
		if err != nil && m.obs != nil {
			m.obs.MachineUp(id, mach)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			e.expectExit = false
			return err
		}
		e.m = nil
		e.expectExit = false
		e.d.Machine = rec
		Fault(FaultHibernateSaved)
		return nil
	})
}

// Wake restores a hibernated desktop.
func (m *Manager) Wake(ctx context.Context, id string) (Desktop, error) {
	// A woken desktop holds memory again: it reserves like a create, and
	// holds the reservation until its record says running (and counts).
	if e, err := m.lookup(id); err == nil {
		release, err := m.reserveComeback(e.snapshot(), "wake")
		if err != nil {
			return e.snapshot(), err
		}
		defer release()
	}
	var woken Machine
	d, err := m.transition(ctx, id, "wake", StateRunning, func(e *entry) error {
		d := e.snapshot()
		if d.State != StateHibernated {
			return &TransitionError{ID: id, From: d.State, Action: "wake"}
		}
		rctx, cancel := context.WithTimeout(m.base, 2*time.Minute)
		defer cancel()
		mach, err := m.drv.Restore(rctx, RestoreSpec{ID: id, Hibernated: d.Machine})
		if err != nil {
			return err
		}
		woken = mach
		Fault(FaultWakeRestored)
		e.mu.Lock()
		e.m = mach
		e.d.Machine = mach.Record()
		e.d.GuestPending = true
		e.guestReady = make(chan struct{})
		e.mu.Unlock()
		// A woken desktop slept for a while: its clock needs setting again
		// (to the host's, plus the offset a create or reset asked for).
		m.machineUp(e, mach, true, nil)
		return nil
	})
	// Only now that the record names the running machine may its guest
	// run and the state it woke from go: until then, recovery wakes the
	// desktop from that state again. Under the desktop's op lock, so a
	// hibernate cannot come between.
	if c, ok := woken.(Committer); ok && err == nil {
		if e, lerr := m.lookup(id); lerr == nil {
			e.op.Lock()
			e.mu.Lock()
			current := e.m == woken
			e.mu.Unlock()
			if current {
				if cerr := c.Committed(ctx); cerr != nil {
					m.log.Error("woken desktop's guest not started", "desktop", id, "err", cerr)
					err = fmt.Errorf("wake %s: %w", id, cerr)
				}
			}
			e.op.Unlock()
		}
	}
	return d, err
}

// Delete ends a desktop and removes everything it owned. Deleting a
// deleted or unknown desktop is ErrNotFound.
func (m *Manager) Delete(ctx context.Context, id string) error {
	e, err := m.lookup(id)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	if e.d.State == StateDeleted {
		e.mu.Unlock()
		return fmt.Errorf("%w: desktop %q", ErrNotFound, id)
	}
	mach := e.m
	before := e.d
	e.expectExit = true
	e.d.State = StateStopping
	d := e.d
	e.mu.Unlock()
	m.releaseVolumes(m.base, before, mach)
	m.store.PutDesktop(d)
	m.publish(EventState, d)
	if m.obs != nil && mach != nil {
		m.obs.MachineDown(id)
	}
	dctx, cancel := context.WithTimeout(m.base, time.Minute)
	defer cancel()
	var derr error
	if mach != nil {
		derr = mach.Destroy(dctx)
	} else {
		derr = m.drv.Cleanup(dctx, d.Machine)
	}
	if derr != nil {
		e.mu.Lock()
		e.d.State = StateFailed
		e.d.Reason = "delete failed: " + derr.Error()
		d = e.d
		e.mu.Unlock()
		m.store.PutDesktop(d)
		m.publish(EventState, d)
		return fmt.Errorf("delete %s: %w", id, derr)
	}
	e.mu.Lock()
	e.m = nil
	e.d.State = StateDeleted
	d = e.d
	e.mu.Unlock()
	if err := m.store.DeleteDesktop(id); err != nil {
		return fmt.Errorf("delete %s: record: %w", id, err)
	}
	m.forget(id)
	if m.obs != nil {
		m.obs.Forget(id)
	}
	m.publish(EventDeleted, d)
	m.collectSnapshots(d.Uses)
	return nil
}

// collectSnapshots removes ephemeral snapshots (fork templates) that no
// desktop uses any more.
func (m *Manager) collectSnapshots(candidates []string) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	// A template may only go once the templates layered on it have gone,
	// so repeat until a pass removes nothing.
	for removed := true; removed; {
		removed = false
		for _, name := range candidates {
			if m.collectOne(name) {
				removed = true
			}
		}
	}
}

func (m *Manager) collectOne(name string) bool {
	m.mu.Lock()
	held := m.held[name] > 0
	m.mu.Unlock()
	if held {
		return false
	}
	s, err := m.catalog.Get(name)
	if err != nil || !s.Manifest.Ephemeral {
		return false
	}
	if len(m.UsersOf(name)) > 0 || len(m.childrenOf(name)) > 0 {
		return false
	}
	if w, ok := m.drv.(Warmer); ok {
		w.Warm(s, 0)
	}
	if err := m.catalog.Remove(name); err != nil {
		m.log.Warn("remove fork template", "snapshot", name, "err", err)
		return false
	}
	return true
}

// hold keeps a snapshot from collection while a fork creates its copies.
func (m *Manager) hold(name string) (release func()) {
	m.mu.Lock()
	m.held[name]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.held[name]--; m.held[name] <= 0 {
			delete(m.held, name)
		}
		m.mu.Unlock()
	}
}

// UsersOf lists the desktops that depend on a snapshot.
func (m *Manager) UsersOf(snapshot string) []string {
	var ids []string
	for _, d := range m.List() {
		if d.State != StateDeleted && slices.Contains(d.Uses, snapshot) {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func (m *Manager) childrenOf(snapshot string) []string {
	snaps, _, _ := m.catalog.List()
	var out []string
	for _, s := range snaps {
		if s.Manifest.Parent == snapshot {
			out = append(out, s.Name)
		}
	}
	return out
}

// RemoveSnapshot deletes a snapshot that no desktop and no other snapshot
// uses.
func (m *Manager) RemoveSnapshot(name string) error {
	s, err := m.catalog.Get(name)
	if err != nil {
		return err
	}
	if users := m.UsersOf(name); len(users) > 0 {
		return fmt.Errorf("%w: snapshot %s is used by %d desktops (%s): delete them first", ErrConflict, name, len(users), joinShort(users))
	}
	if kids := m.childrenOf(name); len(kids) > 0 {
		return fmt.Errorf("%w: snapshots %s are layered on %s: remove them first", ErrConflict, joinShort(kids), name)
	}
	if w, ok := m.drv.(Warmer); ok {
		w.Warm(s, 0)
	}
	return m.catalog.Remove(name)
}

func joinShort(ids []string) string {
	if len(ids) > 5 {
		return fmt.Sprintf("%v and %d more", ids[:5], len(ids)-5)
	}
	return fmt.Sprint(ids)
}
