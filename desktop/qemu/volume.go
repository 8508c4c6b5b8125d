package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.VolumeMachine = (*Machine)(nil)

// openVolume opens a volume's layers as QEMU gets them, one list of
// descriptors per layer: read-only for every layer, and for the top of a
// read-write volume also read-write. QEMU reopens a layer read-only when
// it stops writing it (a fork's freeze puts a new top over it); through an
// fd set it can only take a descriptor of the right mode, and without one
// it would keep its write lock, which the fork's copies must not meet.
func openVolume(v desktop.VolumeDisk) ([][]*os.File, error) {
	var layers [][]*os.File
	for i, p := range v.Layers {
		files, err := openLayer(p, i == len(v.Layers)-1 && !v.ReadOnly)
		if err != nil {
			for _, fs := range layers {
				closeAll(fs)
			}
			return nil, fmt.Errorf("volume layer: %w", err)
		}
		layers = append(layers, files)
	}
	return layers, nil
}

// openLayer opens one layer read-only, and read-write too when writable.
func openLayer(path string, writable bool) ([]*os.File, error) {
	ro, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !writable {
		return []*os.File{ro}, nil
	}
	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		ro.Close()
		return nil, err
	}
	return []*os.File{rw, ro}, nil
}

// addFDs hands each descriptor of a layer to QEMU in the layer's fd set.
func (m *Machine) addFDs(ctx context.Context, set int, files []*os.File) error {
	for _, f := range files {
		if err := m.qmp.ExecuteWithFD(ctx, "add-fd", map[string]any{"fdset-id": set}, int(f.Fd()), nil); err != nil {
			return fmt.Errorf("add-fd: %w", err)
		}
	}
	return nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// AttachVolume hands QEMU the volume's file descriptors, adds its nodes
// and hot-plugs its disk into the slot's root port. On failure the
// machine is left as it was.
func (m *Machine) AttachVolume(ctx context.Context, v desktop.VolumeDisk) error {
	if err := qemuvm.CheckVolumeDisk(v); err != nil {
		return err
	}
	if err := qemuvm.CheckVolumeSlots(m.record().Shape); err != nil {
		return err
	}
	if err := qemuvm.CheckSlotFree(m.record().Volumes, v.Slot); err != nil {
		return err
	}
	layers, err := openVolume(v)
	if err != nil {
		return err
	}
	defer func() { // QEMU keeps its own copies
		for _, fs := range layers {
			closeAll(fs)
		}
	}()
	var undo []func(context.Context)
	rollback := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](uctx)
		}
	}
	for i, files := range layers {
		set := qemuvm.VolumeFDSet(v.Slot, i)
		undo = append(undo, func(c context.Context) { m.qmp.Execute(c, "remove-fd", map[string]any{"fdset-id": set}, nil) })
		if err := m.addFDs(ctx, set, files); err != nil {
			rollback()
			return fmt.Errorf("volume: %w", err)
		}
	}
	for i := range v.Layers {
		if err := m.qmp.Execute(ctx, "blockdev-add", qemuvm.VolumeBlockdev(v, i), nil); err != nil {
			rollback()
			return fmt.Errorf("volume: open layer %d: %w", i, err)
		}
		node := qemuvm.VolumeNode(v.Slot, i)
		undo = append(undo, func(c context.Context) { m.qmp.Execute(c, "blockdev-del", map[string]any{"node-name": node}, nil) })
	}
	if err := m.qmp.Execute(ctx, "device_add", qemuvm.VolumeDevice(v), nil); err != nil {
		rollback()
		return fmt.Errorf("volume: hot-plug: %w", err)
	}
	m.mu.Lock()
	m.rec.Volumes = append(m.rec.Volumes, v)
	m.mu.Unlock()
	return nil
}

// unplugTimeout bounds the guest's answer to an unplug: the guest's ACPI
// code ejects the device, and QEMU reports it gone.
const unplugTimeout = 20 * time.Second

// DetachVolume unplugs a slot's disk, waits until the guest has let it go,
// then closes its nodes and descriptors.
func (m *Machine) DetachVolume(ctx context.Context, slot int) error {
	v, err := qemuvm.VolumeInSlot(m.record().Volumes, slot)
	if err != nil {
		return err
	}
	sub := m.qmp.Subscribe()
	defer sub.Close()
	id := qemuvm.VolumeDeviceID(slot)
	err = m.qmp.Execute(ctx, "device_del", map[string]any{"id": id}, nil)
	var qe *qmp.Error
	gone := errors.As(err, &qe) && qe.Class == "DeviceNotFound"
	if err != nil && !gone {
		return fmt.Errorf("volume: unplug: %w", err)
	}
	if !gone {
		wctx, cancel := context.WithTimeout(ctx, unplugTimeout)
		_, err = sub.Wait(wctx, "DEVICE_DELETED", func(ev qmp.Event) bool {
			var d struct {
				Device string `json:"device"`
			}
			return json.Unmarshal(ev.Data, &d) == nil && d.Device == id
		})
		cancel()
		if err != nil {
			return fmt.Errorf("%w: volume: the guest did not release the disk: %w", desktop.ErrUnavailable, err)
		}
	}
	var errs []error
	for l := len(v.Layers) - 1; l >= 0; l-- {
		if err := m.qmp.Execute(ctx, "blockdev-del", map[string]any{"node-name": qemuvm.VolumeNode(slot, l)}, nil); err != nil {
			errs = append(errs, err)
		}
		m.qmp.Execute(ctx, "remove-fd", map[string]any{"fdset-id": qemuvm.VolumeFDSet(slot, l)}, nil)
	}
	if err := errors.Join(errs...); err != nil {
		// The slot stays recorded: a retry finds the device gone and
		// closes the nodes again.
		return fmt.Errorf("volume: close its nodes: %w", err)
	}
	m.mu.Lock()
	m.rec.Volumes = qemuvm.WithoutSlot(m.rec.Volumes, slot)
	m.mu.Unlock()
	return nil
}

// volumeFiles opens the layers of the volumes a machine starts with (a
// wake) and appends them to the child's inherited files, telling cfg each
// layer's descriptor number there (ExtraFiles start at 3).
func volumeFiles(vols []desktop.VolumeDisk, cfg *Config, extra *[]*os.File) ([]*os.File, error) {
	var all []*os.File
	for _, v := range vols {
		layers, err := openVolume(v)
		if err != nil {
			closeAll(all)
			return nil, err
		}
		fds := make([][]int, len(layers))
		for i, files := range layers {
			for _, f := range files {
				fds[i] = append(fds[i], 3+len(*extra))
				*extra = append(*extra, f)
				all = append(all, f)
			}
		}
		cfg.Volumes = append(cfg.Volumes, VolumeFDs{Disk: v, FDs: fds})
	}
	return all, nil
}

// Volumes are the volumes the machine holds now.
func (m *Machine) Volumes() []desktop.VolumeDisk { return slices.Clone(m.record().Volumes) }

// ForksVolumes: a snapshot of this machine carries its volumes.
func (m *Machine) ForksVolumes() {}

// freezeVolumes moves each read-write volume with a new top in tops onto
// it, at the snapshot's instant (the machine is stopped): the new layer is
// made over the old top, opened through an fd set and put above it
// (blockdev-snapshot). The old top is never written again; a fork's
// branches share it. The record follows each switch as it happens.
func (m *Machine) freezeVolumes(ctx context.Context, tops map[int]string) error {
	for _, v := range m.record().Volumes {
		next, ok := tops[v.Slot]
		if !ok || v.ReadOnly {
			continue
		}
		if err := m.freezeVolume(ctx, v, next); err != nil {
			return fmt.Errorf("volume in slot %d: %w", v.Slot, err)
		}
	}
	return nil
}

func (m *Machine) freezeVolume(ctx context.Context, v desktop.VolumeDisk, next string) error {
	layer := len(v.Layers)
	if err := m.drv.createOverlay(ctx, next, v.Layers[layer-1]); err != nil {
		return err
	}
	files, err := openLayer(next, true)
	if err != nil {
		os.Remove(next)
		return err
	}
	defer closeAll(files)
	set := qemuvm.VolumeFDSet(v.Slot, layer)
	if err := m.addFDs(ctx, set, files); err != nil {
		m.qmp.Execute(context.WithoutCancel(ctx), "remove-fd", map[string]any{"fdset-id": set}, nil)
		os.Remove(next)
		return err
	}
	grown := v
	grown.Layers = append(slices.Clone(v.Layers), next)
	add := qemuvm.VolumeBlockdev(grown, layer)
	add["backing"] = nil // blockdev-snapshot sets it
	node := qemuvm.VolumeNode(v.Slot, layer)
	undo := func() {
		m.qmp.Execute(context.WithoutCancel(ctx), "remove-fd", map[string]any{"fdset-id": set}, nil)
		os.Remove(next)
	}
	if err := m.qmp.Execute(ctx, "blockdev-add", add, nil); err != nil {
		undo()
		return fmt.Errorf("blockdev-add: %w", err)
	}
	if err := m.qmp.Execute(ctx, "blockdev-snapshot", map[string]any{"node": qemuvm.VolumeNode(v.Slot, layer-1), "overlay": node}, nil); err != nil {
		m.qmp.Execute(context.WithoutCancel(ctx), "blockdev-del", map[string]any{"node-name": node}, nil)
		undo()
		return fmt.Errorf("blockdev-snapshot: %w", err)
	}
	m.mu.Lock()
	for i := range m.rec.Volumes {
		if m.rec.Volumes[i].Slot == v.Slot {
			m.rec.Volumes[i].Layers = grown.Layers
		}
	}
	m.mu.Unlock()
	return nil
}

// templateVolumes are blank stand-ins, in dir, for the volumes a template
// receives in a migration: it never runs, so their content does not
// matter, only that the devices are there.
func (d *Driver) templateVolumes(ctx context.Context, vols []desktop.VolumeDisk, dir string) ([]desktop.VolumeDisk, error) {
	var out []desktop.VolumeDisk
	for _, v := range vols {
		size := int64(max(v.SizeMiB, 16)) << 20
		blank := filepath.Join(dir, fmt.Sprintf("volume-%d.qcow2", v.Slot))
		if err := qemuvm.CreateBlank(ctx, d.opts.QemuImg, blank, size); err != nil {
			return nil, err
		}
		// Read-only as the source's: a read-only disk offers the guest
		// another feature, which the migrated state must find again.
		out = append(out, desktop.VolumeDisk{Slot: v.Slot, Serial: v.Serial, Layers: []string{blank}, ReadOnly: v.ReadOnly, SizeMiB: v.SizeMiB})
	}
	return out, nil
}
