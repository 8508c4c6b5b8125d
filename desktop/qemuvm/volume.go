package qemuvm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/warmdesk/warmdesk/desktop"
)

// VolumeSlots is how many volumes a machine takes: one PCIe root port
// each, in the device list of every bake (q35 hot-plugs only into root
// ports, never onto pcie.0 itself). A snapshot carries the empty ports and
// no volume device, so any snapshot takes any volume.
const VolumeSlots = 4

// volumeRootPorts are the hot-plug slots' devices, after the fixed ones.
func volumeRootPorts() []string {
	out := make([]string, VolumeSlots)
	for s := range VolumeSlots {
		out[s] = fmt.Sprintf("pcie-root-port,id=%s,bus=pcie.0,chassis=%d,port=%d,addr=0x%x", VolumeBus(s), VolumePortChassis(s), VolumePortNumber(s), VolumePortSlot(s))
	}
	return out
}

// The root port of a slot: its chassis, its PCIe port number (named, not
// left to defaults: it is in the port's read-only config space, which a
// restore checks, and libvirt would choose another) and its PCI slot.
func VolumePortChassis(slot int) int { return slot + 1 }
func VolumePortNumber(slot int) int  { return 0x10 + slot }
func VolumePortSlot(slot int) int    { return 6 + slot }

// VolumeBus is the root port of a slot, named as libvirt names its PCI
// controllers (pci.INDEX), so both drivers build the same machine.
func VolumeBus(slot int) string { return "pci." + strconv.Itoa(slot+1) }

// VolumeDeviceID is the virtio-blk device of a slot: a libvirt user alias
// (they start with "ua-"), which the libvirt driver gives the disk too.
func VolumeDeviceID(slot int) string { return "ua-vol" + strconv.Itoa(slot) }

// VolumeNode is the block node of layer i (0: base) of a slot's volume.
func VolumeNode(slot, layer int) string { return fmt.Sprintf("vol%d-l%d", slot, layer) }

// VolumeFDSet is the fd set a layer's file descriptor is handed to QEMU in:
// hostd opens the volume's files and QEMU, which may run as a user that
// cannot open them, gets only the descriptors.
func VolumeFDSet(slot, layer int) int { return 100 + slot*32 + layer }

// CheckVolumeDisk refuses a slot or chain a machine cannot take.
func CheckVolumeDisk(v desktop.VolumeDisk) error {
	if v.Slot < 0 || v.Slot >= VolumeSlots {
		return fmt.Errorf("%w: volume slot %d: a machine has slots 0 to %d", desktop.ErrInvalid, v.Slot, VolumeSlots-1)
	}
	if len(v.Layers) == 0 || len(v.Layers) > 32 {
		return fmt.Errorf("%w: volume has %d layers: give 1 to 32", desktop.ErrInvalid, len(v.Layers))
	}
	return nil
}

// CheckVolumeSlots refuses volumes on a machine whose snapshot was baked
// without the root ports (before volumes existed).
func CheckVolumeSlots(s desktop.MachineShape) error {
	for _, port := range volumeRootPorts() {
		if !slices.Contains(s.Devices, port) {
			return fmt.Errorf("%w: this desktop's snapshot was baked without the volumes' hot-plug slots; bake it again (hostd snapshot rm NAME && hostd snapshot bake --image IMAGE --name NAME)", desktop.ErrMismatch)
		}
	}
	return nil
}

// CheckSlotFree refuses a slot a machine's volumes already use.
func CheckSlotFree(vols []desktop.VolumeDisk, slot int) error {
	if slices.ContainsFunc(vols, func(v desktop.VolumeDisk) bool { return v.Slot == slot }) {
		return fmt.Errorf("%w: volume slot %d is taken", desktop.ErrConflict, slot)
	}
	return nil
}

// VolumeInSlot finds the volume in a slot; ErrNotFound when it is empty.
func VolumeInSlot(vols []desktop.VolumeDisk, slot int) (desktop.VolumeDisk, error) {
	i := slices.IndexFunc(vols, func(v desktop.VolumeDisk) bool { return v.Slot == slot })
	if i < 0 {
		return desktop.VolumeDisk{}, fmt.Errorf("%w: volume slot %d holds nothing", desktop.ErrNotFound, slot)
	}
	return vols[i], nil
}

// WithoutSlot is vols without the volume in slot (a new slice).
func WithoutSlot(vols []desktop.VolumeDisk, slot int) []desktop.VolumeDisk {
	return slices.DeleteFunc(slices.Clone(vols), func(v desktop.VolumeDisk) bool { return v.Slot == slot })
}

// VolumeBlockdev is the blockdev-add (and -blockdev) value of layer i of a
// slot's volume: a qcow2 node on the layer's fd set, read-only unless it
// is the top of a read-write volume, on the node of the layer below.
func VolumeBlockdev(v desktop.VolumeDisk, layer int) map[string]any {
	top := layer == len(v.Layers)-1
	var backing any // null: no backing file, whatever the header says
	if layer > 0 {
		backing = VolumeNode(v.Slot, layer-1)
	}
	return map[string]any{
		"driver":    "qcow2",
		"node-name": VolumeNode(v.Slot, layer),
		"read-only": !top || v.ReadOnly,
		"discard":   "unmap",
		"file": map[string]any{
			"driver":   "file",
			"filename": "/dev/fdset/" + strconv.Itoa(VolumeFDSet(v.Slot, layer)),
			// QEMU's image locks are byte-range locks on the open file,
			// and an fd set keeps the file open past QEMU's own use: a
			// layer a fork froze would stay write-locked, and the copies
			// could not open it. Who may write a volume is hostd's rule
			// (volume.CheckAttach), not the locks'.
			"locking": "off",
		},
		"backing": backing,
	}
}

// VolumeDevice is the device_add value of a slot's volume: virtio-blk in
// its root port, with the serial the guest finds it by.
func VolumeDevice(v desktop.VolumeDisk) map[string]any {
	return map[string]any{
		"driver": "virtio-blk-pci",
		"id":     VolumeDeviceID(v.Slot),
		"drive":  VolumeNode(v.Slot, len(v.Layers)-1),
		"bus":    VolumeBus(v.Slot),
		"serial": v.Serial,
	}
}

// VolumeArgs are the command-line options that bring a volume back on a
// machine that restores a state it had (a wake): its fds (fds[i] are
// layer i's descriptor numbers in the child), its nodes and its device.
func VolumeArgs(v desktop.VolumeDisk, fds [][]int) []string {
	var a []string
	for i := range v.Layers {
		for _, fd := range fds[i] {
			a = append(a, "-add-fd", fmt.Sprintf("fd=%d,set=%d", fd, VolumeFDSet(v.Slot, i)))
		}
	}
	for i := range v.Layers {
		b, _ := json.Marshal(VolumeBlockdev(v, i))
		a = append(a, "-blockdev", string(b))
	}
	d := VolumeDevice(v)
	a = append(a, "-device", fmt.Sprintf("virtio-blk-pci,id=%s,drive=%s,bus=%s,serial=%s", d["id"], d["drive"], d["bus"], Escape(v.Serial)))
	return a
}
