package qemuvm_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// A volume's nodes form its chain: each layer on the one below, only a
// read-write volume's top writable, every file through its own fd set.
func TestVolumeBlockdevChain(t *testing.T) {
	v := desktop.VolumeDisk{Slot: 2, Serial: "wdvol2", Layers: []string{"/a", "/b", "/c"}}
	sets := map[any]bool{}
	for i := range v.Layers {
		b := qemuvm.VolumeBlockdev(v, i)
		top := i == len(v.Layers)-1
		if b["read-only"] != !top {
			t.Errorf("layer %d read-only %v", i, b["read-only"])
		}
		want := any(nil)
		if i > 0 {
			want = qemuvm.VolumeNode(2, i-1)
		}
		if b["backing"] != want {
			t.Errorf("layer %d backing %v, want %v", i, b["backing"], want)
		}
		file := b["file"].(map[string]any)
		if sets[file["filename"]] || file["locking"] != "off" {
			t.Errorf("layer %d file %v", i, file)
		}
		sets[file["filename"]] = true
	}
	v.ReadOnly = true
	if qemuvm.VolumeBlockdev(v, 2)["read-only"] != true {
		t.Error("a read-only volume's top is writable")
	}
	d := qemuvm.VolumeDevice(v)
	if d["drive"] != qemuvm.VolumeNode(2, 2) || d["bus"] != qemuvm.VolumeBus(2) || d["serial"] != "wdvol2" {
		t.Errorf("device %v", d)
	}
}

func TestCheckVolumeSlotsAndDisks(t *testing.T) {
	s := desktop.MachineShape{Devices: qemuvm.DeviceArgs(1280, 800)}
	if err := qemuvm.CheckVolumeSlots(s); err != nil {
		t.Errorf("a current bake: %v", err)
	}
	s.Devices = slices.DeleteFunc(slices.Clone(s.Devices), func(d string) bool { return d == s.Devices[len(s.Devices)-1] })
	if err := qemuvm.CheckVolumeSlots(s); !errors.Is(err, desktop.ErrMismatch) {
		t.Errorf("a bake without the last slot: %v", err)
	}
	for _, bad := range []desktop.VolumeDisk{{Slot: -1, Layers: []string{"/a"}}, {Slot: qemuvm.VolumeSlots, Layers: []string{"/a"}}, {Slot: 0}} {
		if err := qemuvm.CheckVolumeDisk(bad); !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
