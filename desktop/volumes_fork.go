// A fork of a desktop with volumes: each copy gets a branch of every
// read-write volume, frozen at the fork.

package desktop

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/warmdesk/warmdesk/volume"
)

// refuseWithVolumes refuses a kept snapshot of a desktop holding volumes:
// a snapshot's state would hold their devices, and any create from it
// would need them.
func refuseWithVolumes(d Desktop) error {
	if len(d.Volumes) == 0 {
		return nil
	}
	var names []string
	for _, v := range d.Volumes {
		names = append(names, v.Name)
	}
	return fmt.Errorf("%w: cannot snapshot desktop %s while it holds volumes (%s): a snapshot does not carry volumes; detach them first (DELETE /v1/desktops/%s/volumes/NAME), or fork it, which branches them", ErrConflict, d.ID, strings.Join(names, ", "), d.ID)
}

// volumeState is a volume's chain as a fork's snapshot holds it.
type volumeState struct {
	layers []string
}

// planForkVolumes names, for each read-write volume of a desktop about to
// fork, the new top layer it goes on on; its old top is frozen for the
// copies' branches.
func (vs *Volumes) planForkVolumes(e *entry, d Desktop) (map[int]string, error) {
	if len(d.Volumes) == 0 {
		return nil, nil
	}
	e.mu.Lock()
	mach := e.m
	e.mu.Unlock()
	if _, ok := mach.(VolumeForker); !ok || vs.reg == nil {
		return nil, fmt.Errorf("%w: the %s driver does not branch volumes on fork yet; detach the desktop's volumes first", ErrInvalid, vs.m.drv.Name())
	}
	tops := map[int]string{}
	for _, mnt := range d.Volumes {
		if mnt.Mode != volume.ReadWrite {
			continue
		}
		v, err := vs.reg.Get(mnt.Name)
		if err != nil {
			return nil, err
		}
		if len(v.Layers)+1 > volume.MaxLayers {
			return nil, fmt.Errorf("%w: volume %s has %d layers; a fork adds one, past the most a volume may have (%d): fill a fresh volume from its archive", ErrConflict, v.Name, len(v.Layers), volume.MaxLayers)
		}
		tops[mnt.Slot] = vs.reg.NewLayerPath()
	}
	return tops, nil
}

// recordForkVolumes records the layers a fork's snapshot moved the
// desktop's read-write volumes on to (whether or not the snapshot then
// succeeded), and returns each volume's chain as the snapshot holds it.
func (vs *Volumes) recordForkVolumes(e *entry, d Desktop, tops map[int]string) map[int]volumeState {
	e.mu.Lock()
	mach := e.m
	e.mu.Unlock()
	vm, ok := mach.(VolumeMachine)
	if !ok {
		return nil
	}
	disks := vm.Volumes()
	out := map[int]volumeState{}
	for _, mnt := range d.Volumes {
		i := slices.IndexFunc(disks, func(v VolumeDisk) bool { return v.Slot == mnt.Slot })
		if i < 0 {
			continue
		}
		layers := disks[i].Layers
		if mnt.Mode == volume.ReadOnly {
			out[mnt.Slot] = volumeState{layers: layers}
			continue
		}
		if top, ok := tops[mnt.Slot]; !ok || layers[len(layers)-1] != top {
			continue // not frozen: the snapshot failed before it
		}
		if err := vs.reg.Advance(mnt.Name, layers); err != nil {
			vs.m.log.Error("record a volume's new top after a fork", "volume", mnt.Name, "err", err)
		}
		out[mnt.Slot] = volumeState{layers: layers[:len(layers)-1]}
	}
	e.mu.Lock()
	e.d.Machine = mach.Record()
	rec := e.d
	e.mu.Unlock()
	if err := vs.m.store.PutDesktop(rec); err != nil {
		vs.m.log.Error("record a desktop's volumes after a fork", "desktop", d.ID, "err", err)
	}
	return out
}

// branchVolumes makes a fork copy's volumes: a branch of each read-write
// volume on its frozen state, named after the copy, and each read-only
// one as it is.
func (vs *Volumes) branchVolumes(ctx context.Context, src Desktop, frozen map[int]volumeState, copyName string) (mounts []volume.Mount, disks []VolumeDisk, made []string, err error) {
	for _, mnt := range src.Volumes {
		st, ok := frozen[mnt.Slot]
		if !ok {
			return mounts, disks, made, fmt.Errorf("volume %s: its state at the fork is unknown", mnt.Name)
		}
		v, err := vs.reg.Get(mnt.Name)
		if err != nil {
			return mounts, disks, made, err
		}
		disk := VolumeDisk{Slot: mnt.Slot, Serial: volume.Serial(mnt.Slot), Layers: st.layers, ReadOnly: true, SizeMiB: v.SizeMiB}
		if mnt.Mode == volume.ReadWrite {
			b, err := vs.reg.Branch(ctx, volume.BranchName(mnt.Name, copyName), v, st.layers)
			if err != nil {
				return mounts, disks, made, err
			}
			made = append(made, b.Name)
			mnt.Name = b.Name
			disk.Layers, disk.ReadOnly = b.Layers, false
		}
		mounts = append(mounts, mnt)
		disks = append(disks, disk)
	}
	return mounts, disks, made, nil
}
