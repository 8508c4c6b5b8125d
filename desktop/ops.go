// Snapshots of desktops and forks: a running desktop's state saved as a
// new snapshot, kept or as a fork's template.

package desktop

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Snapshot turns a running or paused desktop into a new golden snapshot
// that later creates can use; the desktop keeps running.
func (l *Lineage) Snapshot(ctx context.Context, id, name string) (Snapshot, error) {
	m := l.m
	if err := m.capacity.checkSpace("snapshot"); err != nil {
		return Snapshot{}, err
	}
	e, err := m.lookup(id)
	if err != nil {
		return Snapshot{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	return l.snapshotLocked(ctx, e, name, false, nil)
}

// snapshotLocked snapshots a desktop whose op lock the caller holds.
// A fork's snapshot (ephemeral) freezes the desktop's read-write volumes
// onto the new tops in volumeTops; a kept snapshot refuses volumes.
func (l *Lineage) snapshotLocked(ctx context.Context, e *entry, name string, ephemeral bool, volumeTops map[int]string) (Snapshot, error) {
	m := l.m
	e.mu.Lock()
	d, mach := e.d, e.m
	e.mu.Unlock()
	if !d.State.Live() || mach == nil {
		return Snapshot{}, &TransitionError{ID: d.ID, From: d.State, Action: "snapshot"}
	}
	if !ephemeral {
		if err := refuseWithVolumes(d); err != nil {
			return Snapshot{}, err
		}
	}
	parent, err := m.catalog.Get(d.Snapshot)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: its snapshot %s: %w", d.ID, d.Snapshot, err)
	}
	draft, err := m.catalog.Begin(name)
	if err != nil {
		return Snapshot{}, err
	}
	defer draft.Abort()
	sctx, cancel := context.WithTimeout(m.base, 5*time.Minute)
	defer cancel()
	shape, err := mach.Snapshot(sctx, draft.Dir, SnapshotOptions{Ephemeral: ephemeral, VolumeTops: volumeTops})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", d.ID, err)
	}
	var slots []int
	for _, v := range d.Volumes {
		slots = append(slots, v.Slot)
	}
	snap, err := draft.Commit(&Manifest{
		BakedBy: m.drv.Name(), Ephemeral: ephemeral, Parent: parent.Name, Source: d.ID,
		Machine: shape, Image: parent.Manifest.Image, OnCreate: parent.Manifest.OnCreate, VolumeSlots: slots,
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", d.ID, err)
	}
	// The desktop's disk now layers on the snapshot's frozen disk: the
	// snapshot stays while the desktop lives.
	if err := mach.AdoptSnapshot(sctx, snap); err != nil {
		m.log.Error("point the desktop's disk at its snapshot", "desktop", d.ID, "err", err)
	}
	Fault(FaultSnapshotCommitted)
	e.mu.Lock()
	e.d.Uses = append(e.d.Uses, snap.Name)
	e.d.Machine = mach.Record()
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record desktop after snapshot", "desktop", d.ID, "err", err)
	}
	if !ephemeral {
		l.pools.start(snap)
	}
	return snap, nil
}

// Fork makes n live copies of a running or paused desktop, each with its
// own disk overlay; the source keeps running. It is all or nothing: if any
// copy fails, the others are deleted.
func (l *Lineage) Fork(ctx context.Context, id string, n int) ([]Desktop, error) {
	m := l.m
	if n < 1 || n > m.capacity.limits.MaxFork {
		return nil, fmt.Errorf("%w: count %d: use 1 to %d", ErrInvalid, n, m.capacity.limits.MaxFork)
	}
	e, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	src := e.snapshot()
	if !src.State.Live() {
		return nil, &TransitionError{ID: id, From: src.State, Action: "fork"}
	}
	if err := m.capacity.checkSpace("fork"); err != nil {
		return nil, err
	}
	if err := m.cpu.admit(ctx, "fork"); err != nil {
		return nil, err
	}
	release, err := m.capacity.reserve(n, src.Resources.MemoryMiB)
	if err != nil {
		return nil, err
	}
	defer release()
	name := NewID("fork-")
	unhold := l.hold(name)
	defer func() {
		unhold()
		l.collect([]string{name})
	}()
	e.op.Lock()
	src = e.snapshot()
	tops, err := m.vols.planForkVolumes(e, src)
	var snap Snapshot
	if err == nil {
		snap, err = l.snapshotLocked(ctx, e, name, true, tops)
	}
	var frozen map[int]volumeState
	if len(src.Volumes) > 0 {
		frozen = m.vols.recordForkVolumes(e, src, tops)
	}
	e.op.Unlock()
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", id, err)
	}
	Fault(FaultForkSnapshotted)
	copies := make([]Desktop, n)
	errs := make([]error, n)
	branches := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := CreateRequest{Snapshot: snap.Name, Network: src.Network, DiskMiB: src.Resources.DiskMiB,
				Labels: src.Labels, Env: src.Env}
			if src.Name != src.ID {
				req.Name = fmt.Sprintf("%s-fork%d", src.Name, i+1)
			}
			plan := createPlan{forkOf: id, id: NewID("d-"), clockOffset: src.ClockOffset}
			if len(src.Volumes) > 0 {
				// Branches are named after the copy's id: copies' names
				// repeat from fork to fork, and branches outlive copies.
				plan.inState, plan.disks, branches[i], errs[i] = m.vols.branchVolumes(ctx, src, frozen, plan.id)
				if errs[i] != nil {
					return
				}
			}
			copies[i], errs[i] = m.create(ctx, req, snap, plan)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, c := range copies {
				if c.ID != "" {
					m.Delete(context.WithoutCancel(ctx), c.ID)
				}
			}
			for _, bs := range branches {
				for _, b := range bs {
					if rerr := m.vols.Remove(b); rerr != nil {
						m.log.Warn("remove the volume branch of a failed fork", "volume", b, "err", rerr)
					}
				}
			}
			l.collect([]string{snap.Name})
			return nil, fmt.Errorf("fork %s: %w", id, err)
		}
	}
	return copies, nil
}
