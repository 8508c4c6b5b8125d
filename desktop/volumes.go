package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/volume"
)

// Volumes: who holds a volume is read from the desktops' records (every
// desktop that is not failed or deleted holds what it lists) plus the
// claims of attaches and archives in flight, all under m.mu, so two
// attaches cannot both win a read-write hold.

// archiveHolder names an archive in flight among a volume's holders.
const archiveHolder = "(archive in progress)"

// guestVolumeTimeout bounds a mount or unmount in the guest.
const guestVolumeTimeout = 30 * time.Second

// Volumes is the volume registry, nil when volumes are off.
func (m *Manager) Volumes() *volume.Registry { return m.vols }

func (m *Manager) volumesOn() error {
	if m.vols == nil {
		return fmt.Errorf("%w: volumes are not enabled on this host", ErrInvalid)
	}
	return nil
}

// VolumeHolders lists the desktops (and archives) holding a volume.
func (m *Manager) VolumeHolders(name string) []volume.Holder {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdersLocked(name)
}

func (m *Manager) holdersLocked(name string) []volume.Holder {
	var out []volume.Holder
	for _, e := range m.desktops {
		// A failed desktop still holds its volumes until it is deleted:
		// its machine may not have ended (a delete that failed).
		d := e.snapshot()
		if d.State == StateDeleted {
			continue
		}
		for _, v := range d.Volumes {
			if v.Name == name {
				out = append(out, volume.Holder{Desktop: d.ID, Mode: v.Mode})
			}
		}
	}
	out = append(out, m.claims[name]...)
	slices.SortFunc(out, func(a, b volume.Holder) int { return strings.Compare(a.Desktop, b.Desktop) })
	return out
}

// claimVolume holds a volume for who in mode while an attach or archive
// runs, under the attachment rules.
func (m *Manager) claimVolume(name, who string, mode volume.Mode) (release func(), err error) {
	v, err := m.vols.Get(name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := volume.CheckAttach(v, m.holdersLocked(name), who, mode); err != nil {
		return nil, err
	}
	h := volume.Holder{Desktop: who, Mode: mode}
	m.claims[name] = append(m.claims[name], h)
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		cs := m.claims[name]
		if i := slices.Index(cs, h); i >= 0 {
			m.claims[name] = slices.Delete(cs, i, i+1)
		}
		if len(m.claims[name]) == 0 {
			delete(m.claims, name)
		}
	}, nil
}

// claimVolumes claims each volume a create asks for; all or none.
func (m *Manager) claimVolumes(id string, ms []volume.Mount) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, v := range ms {
		r, err := m.claimVolume(v.Name, id, v.Mode)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	return release, nil
}

// checkCreateVolumes checks and numbers the volumes a create asks for.
func (m *Manager) checkCreateVolumes(ms []volume.Mount) ([]volume.Mount, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if err := m.volumesOn(); err != nil {
		return nil, err
	}
	out := make([]volume.Mount, len(ms))
	for i, v := range ms {
		out[i] = v.Normalize()
		out[i].Slot = i
	}
	if err := volume.ValidateSet(out); err != nil {
		return nil, err
	}
	return out, nil
}

// AttachVolume attaches a volume to a live desktop and mounts it in the
// guest. When the hot-plug or the mount fails, the desktop runs on without
// the volume and the error says why.
func (m *Manager) AttachVolume(ctx context.Context, id string, req volume.Mount) (Desktop, error) {
	if err := m.volumesOn(); err != nil {
		return Desktop{}, err
	}
	req = req.Normalize()
	if err := req.Validate(); err != nil {
		return Desktop{}, err
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	d := e.snapshot()
	if d.State != StateRunning {
		// A paused guest cannot mount, nor let a disk go.
		return d, &TransitionError{ID: id, From: d.State, Action: "attach a volume to"}
	}
	// With the volumes it holds: no mount inside another, no more than
	// its slots.
	if err := volume.ValidateSet(append(slices.Clone(d.Volumes), req)); err != nil {
		return d, err
	}
	req.Slot = volume.FreeSlot(d.Volumes)
	release, err := m.claimVolume(req.Name, id, req.Mode)
	if err != nil {
		return d, err
	}
	defer release()
	if err := m.attachLocked(ctx, e, req, true); err != nil {
		return e.snapshot(), err
	}
	return e.snapshot(), nil
}

// attachLocked hot-plugs and mounts one claimed volume on a desktop whose
// op lock the caller holds, then records it.
func (m *Manager) attachLocked(ctx context.Context, e *entry, req volume.Mount, announce bool) error {
	e.mu.Lock()
	mach, id := e.m, e.d.ID
	e.mu.Unlock()
	vm, ok := mach.(VolumeMachine)
	if !ok {
		return fmt.Errorf("%w: the %s driver does not attach volumes yet", ErrInvalid, m.drv.Name())
	}
	v, err := m.vols.Get(req.Name)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	start := time.Now()
	disk := VolumeDisk{Slot: req.Slot, Serial: volume.Serial(req.Slot), Layers: v.Layers, ReadOnly: req.Mode == volume.ReadOnly, SizeMiB: v.SizeMiB}
	if err := vm.AttachVolume(actx, disk); err != nil {
		return fmt.Errorf("volume %s: %w", req.Name, err)
	}
	plugged := time.Since(start)
	MarkPhase(ctx, "volume_plugged")
	if err := mountInGuest(actx, mach.Agent(), disk.Serial, req.Mount, req.Mode); err != nil {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		derr := vm.DetachVolume(uctx, req.Slot)
		ucancel()
		if derr == nil {
			return fmt.Errorf("volume %s: %w", req.Name, err)
		}
		// Still plugged: the desktop keeps holding it, so nobody else
		// can write it; a detach may succeed later.
		m.log.Warn("unplug a volume the guest did not mount", "desktop", id, "volume", req.Name, "err", derr)
		m.recordVolume(e, mach, req)
		return fmt.Errorf("volume %s: %w; it could not be unplugged (%v) and stays attached: detach it (DELETE /v1/desktops/%s/volumes/%s) or delete the desktop", req.Name, err, derr, id, req.Name)
	}
	MarkPhase(ctx, "volume_mounted")
	m.log.Debug("volume attached", "desktop", id, "volume", req.Name, "plugged", plugged, "mounted", time.Since(start))
	if req.Mode == volume.ReadWrite {
		if err := m.vols.MarkFilled(req.Name); err != nil {
			m.log.Warn("record a volume written", "volume", req.Name, "err", err)
		}
	}
	d := m.recordVolume(e, mach, req)
	if announce {
		m.publish(EventVolumes, d)
	}
	return nil
}

// recordVolume records a volume the desktop holds.
func (m *Manager) recordVolume(e *entry, mach Machine, req volume.Mount) Desktop {
	e.mu.Lock()
	e.d.Volumes = append(e.d.Volumes, req)
	e.d.Machine = mach.Record()
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		m.log.Error("record a desktop's volume", "desktop", d.ID, "err", err)
	}
	return d
}

// DetachVolume unmounts a volume in the guest (after syncing it), unplugs
// it and keeps it. A volume the guest still uses is refused.
func (m *Manager) DetachVolume(ctx context.Context, id, name string) (Desktop, error) {
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	d, mach := e.d, e.m
	e.mu.Unlock()
	i := slices.IndexFunc(d.Volumes, func(v volume.Mount) bool { return v.Name == name })
	if i < 0 {
		return d, fmt.Errorf("%w: desktop %s holds no volume %q", ErrNotFound, id, name)
	}
	if !d.State.Live() || mach == nil {
		return d, &TransitionError{ID: id, From: d.State, Action: "detach a volume from"}
	}
	vol := d.Volumes[i]
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := unmountInGuest(dctx, mach.Agent(), vol.Mount); err != nil {
		return d, fmt.Errorf("volume %s: %w", name, err)
	}
	vm, ok := mach.(VolumeMachine)
	if !ok {
		return d, fmt.Errorf("%w: the %s driver does not detach volumes", ErrInvalid, m.drv.Name())
	}
	if err := vm.DetachVolume(dctx, vol.Slot); err != nil && !errors.Is(err, ErrNotFound) {
		return d, fmt.Errorf("volume %s: %w", name, err)
	}
	e.mu.Lock()
	e.d.Volumes = slices.DeleteFunc(slices.Clone(e.d.Volumes), func(v volume.Mount) bool { return v.Name == name })
	e.d.Machine = mach.Record()
	d = e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return d, fmt.Errorf("volume %s: record: %w", name, err)
	}
	m.publish(EventVolumes, d)
	return d, nil
}

// releaseVolumes syncs and unmounts a desktop's volumes before its machine
// ends, so their filesystems are clean for the next desktop. Best effort:
// the journal covers a guest that does not answer.
func (m *Manager) releaseVolumes(ctx context.Context, d Desktop, mach Machine) {
	if len(d.Volumes) == 0 || mach == nil || d.State != StateRunning {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for _, v := range d.Volumes {
		if err := unmountInGuest(ctx, mach.Agent(), v.Mount); err != nil {
			m.log.Warn("volume not unmounted before the desktop ended", "desktop", d.ID, "volume", v.Name, "err", err)
		}
	}
}

// RemoveVolume deletes a volume no desktop holds.
func (m *Manager) RemoveVolume(name string) error {
	return m.withVolume(name, volume.ReadWrite, func() error { return m.vols.Remove(name) })
}

// FreezeVolume makes volume snapshot snap of a volume no desktop writes.
func (m *Manager) FreezeVolume(ctx context.Context, name, snap string) (v volume.Volume, err error) {
	err = m.withVolume(name, volume.ReadOnly, func() error {
		v, err = m.vols.Freeze(ctx, name, snap)
		return err
	})
	return v, err
}

// ExportVolume streams a tar of a volume no desktop writes.
func (m *Manager) ExportVolume(ctx context.Context, name string, w io.Writer) error {
	return m.withVolume(name, volume.ReadOnly, func() error { return m.vols.Export(ctx, name, w) })
}

// ImportVolume fills a blank volume no desktop holds from a tar.
func (m *Manager) ImportVolume(ctx context.Context, name string, r io.Reader) error {
	return m.withVolume(name, volume.ReadWrite, func() error { return m.vols.Import(ctx, name, r) })
}

// withVolume runs fn on a volume while holding it for the host's own use:
// read-write (nobody else holds it: a removal, a fill) or read-only (no
// desktop writes it: a freeze, an export).
func (m *Manager) withVolume(name string, mode volume.Mode, fn func() error) error {
	if err := m.volumesOn(); err != nil {
		return err
	}
	var release func()
	var err error
	if mode == volume.ReadWrite {
		release, err = m.claimAlone(name)
	} else {
		release, err = m.claimVolume(name, archiveHolder, mode)
	}
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// claimAlone claims a volume read-write for the host, failing with the
// holders named when any desktop holds it.
func (m *Manager) claimAlone(name string) (func(), error) {
	if _, err := m.vols.Get(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	holders := m.holdersLocked(name)
	m.mu.Unlock()
	if len(holders) > 0 {
		return nil, volume.ErrBusy(name, holders)
	}
	return m.claimVolume(name, archiveHolder, volume.ReadWrite)
}
