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

// Volumes lends the host's volumes: to desktops (attach, detach, a fork's
// branches) and to the host itself (archive, fill, removal). Who holds a
// volume is read from the desktops' records (every desktop not deleted
// holds what it lists) plus the claims of attaches and archives in flight,
// all under the Manager's mu, so two attaches cannot both win a
// read-write hold.
type Volumes struct {
	m *Manager
	// reg is the registry; nil when volumes are off.
	reg *volume.Registry
	// claims are the holds of attaches and archives in flight, by volume,
	// guarded by m.mu.
	claims map[string][]volume.Holder
}

// archiveHolder names an archive in flight among a volume's holders.
const archiveHolder = "(archive in progress)"

// guestVolumeTimeout bounds a mount or unmount in the guest.
const guestVolumeTimeout = 30 * time.Second

// Registry is the volume registry, nil when volumes are off.
func (vs *Volumes) Registry() *volume.Registry { return vs.reg }

func (vs *Volumes) volumesOn() error {
	if vs.reg == nil {
		return fmt.Errorf("%w: volumes are not enabled on this host", ErrInvalid)
	}
	return nil
}

// Holders lists the desktops (and archives) holding a volume.
func (vs *Volumes) Holders(name string) []volume.Holder {
	vs.m.mu.Lock()
	defer vs.m.mu.Unlock()
	return vs.holdersLocked(name)
}

func (vs *Volumes) holdersLocked(name string) []volume.Holder {
	var out []volume.Holder
	for _, e := range vs.m.desktops {
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
	out = append(out, vs.claims[name]...)
	slices.SortFunc(out, func(a, b volume.Holder) int { return strings.Compare(a.Desktop, b.Desktop) })
	return out
}

// claimVolume holds a volume for who in mode while an attach or archive
// runs, under the attachment rules.
func (vs *Volumes) claimVolume(name, who string, mode volume.Mode) (release func(), err error) {
	v, err := vs.reg.Get(name)
	if err != nil {
		return nil, err
	}
	vs.m.mu.Lock()
	defer vs.m.mu.Unlock()
	if err := volume.CheckAttach(v, vs.holdersLocked(name), who, mode); err != nil {
		return nil, err
	}
	h := volume.Holder{Desktop: who, Mode: mode}
	vs.claims[name] = append(vs.claims[name], h)
	return func() {
		vs.m.mu.Lock()
		defer vs.m.mu.Unlock()
		cs := vs.claims[name]
		if i := slices.Index(cs, h); i >= 0 {
			vs.claims[name] = slices.Delete(cs, i, i+1)
		}
		if len(vs.claims[name]) == 0 {
			delete(vs.claims, name)
		}
	}, nil
}

// claimVolumes claims each volume a create asks for; all or none.
func (vs *Volumes) claimVolumes(id string, ms []volume.Mount) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, v := range ms {
		r, err := vs.claimVolume(v.Name, id, v.Mode)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	return release, nil
}

// checkCreateVolumes checks and numbers the volumes a create asks for.
func (vs *Volumes) checkCreateVolumes(ms []volume.Mount) ([]volume.Mount, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if err := vs.volumesOn(); err != nil {
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

// Attach attaches a volume to a live desktop and mounts it in the
// guest. When the hot-plug or the mount fails, the desktop runs on without
// the volume and the error says why.
func (vs *Volumes) Attach(ctx context.Context, id string, req volume.Mount) (Desktop, error) {
	if err := vs.volumesOn(); err != nil {
		return Desktop{}, err
	}
	req = req.Normalize()
	if err := req.Validate(); err != nil {
		return Desktop{}, err
	}
	e, err := vs.m.lookup(id)
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
	release, err := vs.claimVolume(req.Name, id, req.Mode)
	if err != nil {
		return d, err
	}
	defer release()
	if err := vs.attachLocked(ctx, e, req, true); err != nil {
		return e.snapshot(), err
	}
	return e.snapshot(), nil
}

// attachLocked hot-plugs and mounts one claimed volume on a desktop whose
// op lock the caller holds, then records it.
func (vs *Volumes) attachLocked(ctx context.Context, e *entry, req volume.Mount, announce bool) error {
	e.mu.Lock()
	mach, id := e.m, e.d.ID
	e.mu.Unlock()
	vm, ok := mach.(VolumeMachine)
	if !ok {
		return fmt.Errorf("%w: the %s driver does not attach volumes yet", ErrInvalid, vs.m.drv.Name())
	}
	v, err := vs.reg.Get(req.Name)
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
		vs.m.log.Warn("unplug a volume the guest did not mount", "desktop", id, "volume", req.Name, "err", derr)
		vs.recordVolume(e, mach, req)
		return fmt.Errorf("volume %s: %w; it could not be unplugged (%v) and stays attached: detach it (DELETE /v1/desktops/%s/volumes/%s) or delete the desktop", req.Name, err, derr, id, req.Name)
	}
	MarkPhase(ctx, "volume_mounted")
	vs.m.log.Debug("volume attached", "desktop", id, "volume", req.Name, "plugged", plugged, "mounted", time.Since(start))
	if req.Mode == volume.ReadWrite {
		if err := vs.reg.MarkFilled(req.Name); err != nil {
			vs.m.log.Warn("record a volume written", "volume", req.Name, "err", err)
		}
	}
	d := vs.recordVolume(e, mach, req)
	if announce {
		vs.m.publish(EventVolumes, d)
	}
	return nil
}

// recordVolume records a volume the desktop holds.
func (vs *Volumes) recordVolume(e *entry, mach Machine, req volume.Mount) Desktop {
	e.mu.Lock()
	e.d.Volumes = append(e.d.Volumes, req)
	e.d.Machine = mach.Record()
	d := e.d
	e.mu.Unlock()
	if err := vs.m.store.PutDesktop(d); err != nil {
		vs.m.log.Error("record a desktop's volume", "desktop", d.ID, "err", err)
	}
	return d
}

// Detach unmounts a volume in the guest (after syncing it), unplugs
// it and keeps it. A volume the guest still uses is refused.
func (vs *Volumes) Detach(ctx context.Context, id, name string) (Desktop, error) {
	e, err := vs.m.lookup(id)
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
		return d, fmt.Errorf("%w: the %s driver does not detach volumes", ErrInvalid, vs.m.drv.Name())
	}
	if err := vm.DetachVolume(dctx, vol.Slot); err != nil && !errors.Is(err, ErrNotFound) {
		return d, fmt.Errorf("volume %s: %w", name, err)
	}
	e.mu.Lock()
	e.d.Volumes = slices.DeleteFunc(slices.Clone(e.d.Volumes), func(v volume.Mount) bool { return v.Name == name })
	e.d.Machine = mach.Record()
	d = e.d
	e.mu.Unlock()
	if err := vs.m.store.PutDesktop(d); err != nil {
		return d, fmt.Errorf("volume %s: record: %w", name, err)
	}
	vs.m.publish(EventVolumes, d)
	return d, nil
}

// releaseVolumes syncs and unmounts a desktop's volumes before its machine
// ends, so their filesystems are clean for the next desktop. Best effort:
// the journal covers a guest that does not answer.
func (vs *Volumes) releaseVolumes(ctx context.Context, d Desktop, mach Machine) {
	if len(d.Volumes) == 0 || mach == nil || d.State != StateRunning {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for _, v := range d.Volumes {
		if err := unmountInGuest(ctx, mach.Agent(), v.Mount); err != nil {
			vs.m.log.Warn("volume not unmounted before the desktop ended", "desktop", d.ID, "volume", v.Name, "err", err)
		}
	}
}

// Remove deletes a volume no desktop holds.
func (vs *Volumes) Remove(name string) error {
	return vs.withVolume(name, volume.ReadWrite, func() error { return vs.reg.Remove(name) })
}

// Freeze makes volume snapshot snap of a volume no desktop writes.
func (vs *Volumes) Freeze(ctx context.Context, name, snap string) (v volume.Volume, err error) {
	err = vs.withVolume(name, volume.ReadOnly, func() error {
		v, err = vs.reg.Freeze(ctx, name, snap)
		return err
	})
	return v, err
}

// Export streams a tar of a volume no desktop writes.
func (vs *Volumes) Export(ctx context.Context, name string, w io.Writer) error {
	return vs.withVolume(name, volume.ReadOnly, func() error { return vs.reg.Export(ctx, name, w) })
}

// Import fills a blank volume no desktop holds from a tar.
func (vs *Volumes) Import(ctx context.Context, name string, r io.Reader) error {
	return vs.withVolume(name, volume.ReadWrite, func() error { return vs.reg.Import(ctx, name, r) })
}

// withVolume runs fn on a volume while holding it for the host's own use:
// read-write (nobody else holds it: a removal, a fill) or read-only (no
// desktop writes it: a freeze, an export).
func (vs *Volumes) withVolume(name string, mode volume.Mode, fn func() error) error {
	if err := vs.volumesOn(); err != nil {
		return err
	}
	var release func()
	var err error
	if mode == volume.ReadWrite {
		release, err = vs.claimAlone(name)
	} else {
		release, err = vs.claimVolume(name, archiveHolder, mode)
	}
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// claimAlone claims a volume read-write for the host, failing with the
// holders named when any desktop holds it.
func (vs *Volumes) claimAlone(name string) (func(), error) {
	if _, err := vs.reg.Get(name); err != nil {
		return nil, err
	}
	vs.m.mu.Lock()
	holders := vs.holdersLocked(name)
	vs.m.mu.Unlock()
	if len(holders) > 0 {
		return nil, volume.ErrBusy(name, holders)
	}
	return vs.claimVolume(name, archiveHolder, volume.ReadWrite)
}

// CheckIdle checks the disk of every volume no desktop holds (hostd does
// at start): one a crash damaged is marked so, and never attached.
func (vs *Volumes) CheckIdle(ctx context.Context) {
	if vs.reg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, v := range vs.reg.List() {
		if len(vs.Holders(v.Name)) > 0 || v.Frozen {
			continue
		}
		if err := vs.reg.Check(ctx, v.Name); err != nil {
			vs.m.log.Warn("volume not checked", "volume", v.Name, "err", err)
		}
	}
}
