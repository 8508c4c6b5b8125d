// Creating a desktop: the request, its checks, and the restore that makes it.

package desktop

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/netpolicy"
	"github.com/warmdesk/warmdesk/volume"
)

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
	if req.TTL < 0 || req.TTL > m.capacity.limits.MaxTTL {
		return fmt.Errorf("%w: ttl %s: use 0 (none) up to %s", ErrInvalid, req.TTL, m.capacity.limits.MaxTTL)
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
	if req.DiskMiB < 0 || req.DiskMiB > m.capacity.limits.MaxDiskMiB {
		return fmt.Errorf("%w: disk_mib %d: use 0 (no limit) up to %d", ErrInvalid, req.DiskMiB, m.capacity.limits.MaxDiskMiB)
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
	if err := m.capacity.checkSpace("create"); err != nil {
		return Desktop{}, err
	}
	if err := m.cpu.admit(ctx, "create"); err != nil {
		return Desktop{}, err
	}
	release, err := m.capacity.reserve(1, snap.Manifest.Machine.MemoryMiB)
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
		Uses:         m.lineage.chain(snap),
		GuestPending: true,
		Labels:       maps.Clone(req.Labels), Env: maps.Clone(req.Env),
	}
	if d.Name == "" {
		d.Name = id
	}
	if req.TTL > 0 {
		exp := now.Add(req.TTL)
		d.ExpiresAt, d.TTL = &exp, req.TTL
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
	mounts, err := m.vols.checkCreateVolumes(req.Volumes)
	if err != nil {
		return Desktop{}, err
	}
	claims := mounts
	if plan.inState != nil {
		claims = plan.inState
	}
	releaseVolumes, err := m.vols.claimVolumes(id, claims)
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
	e := &entry{d: d, guest: guestState{ready: newGuestReady(), onCreate: onCreate}}
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
		if err := m.vols.attachLocked(ctx, e, v, false); err != nil {
			m.abandon(e, mach)
			return Desktop{}, fmt.Errorf("create: %w; the desktop was removed", err)
		}
	}
	set := m.machineUp(e, mach, true, req.Clock)
	if err := m.setup.waitClock(ctx, e, set); err != nil {
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
