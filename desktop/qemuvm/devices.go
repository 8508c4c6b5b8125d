package qemuvm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop"
)

// Fixed names the device list and the rest of the command line refer to. A
// restore needs the same devices as the bake, and the devices refer to
// their backends by these ids, so they never change.
const (
	MemoryBackendID = "mem0"
	DiskNodeID      = "disk0"
	AgentCharID     = "charchannel0"
	SerialCharID    = "charserial0"
	NetdevID        = "hostnet0"
	MonitorCharID   = "charmonitor"
	AgentPortName   = "org.qemu.guest_agent.0"
	// DevToolsCharID and DevToolsPortName are the DevTools bridge's
	// virtio-serial port (package devtools; the guest's end is
	// images/guest/cdp-bridge).
	DevToolsCharID   = "charchannel1"
	DevToolsPortName = "org.warmdesk.cdp.0"
	// DevToolsSocket is the bridge's socket in the machine's run directory.
	DevToolsSocket = "cdp.sock"
	DiskDeviceID   = "virtio-disk0"
	// GuestMAC is the same in every clone: each clone has its own
	// user-mode network, so they never meet.
	GuestMAC = "52:54:00:77:64:01"
)

// DeviceArgs is the device list (the values of -device) of a new bake at
// the given resolution: std VGA (the guest's Xorg drives it with
// modesetting; its EDID offers the resolution), a virtio tablet for
// absolute pointer input (not QEMU's USB tablet: under TCG the guest polls
// the USB controller late, folds a move into an unread press, and in CI
// once in about a hundred restores stopped reading it altogether), the guest agent
// and the DevTools bridge on virtio-serial, the disk, a NIC whose
// backend decides whether there is any network, a serial console, and
// vmgenid so every clone reseeds its RNG, and the empty root ports volumes are
// hot-plugged into. PCI addresses are explicit so
// that every driver builds the same machine; snapshot manifests record
// this list.
func DeviceArgs(width, height int) []string {
	return append([]string{
		fmt.Sprintf("VGA,id=video0,vgamem_mb=%d,xres=%d,yres=%d,bus=pcie.0,addr=0x1", VideoMemoryMiB(width, height), width, height),
		"virtio-tablet-pci,id=input0,bus=pcie.0,addr=0x2",
		"virtio-serial-pci,id=virtio-serial0,bus=pcie.0,addr=0x3",
		"virtserialport,id=channel0,bus=virtio-serial0.0,nr=1,chardev=" + AgentCharID + ",name=" + AgentPortName,
		"virtserialport,id=channel1,bus=virtio-serial0.0,nr=2,chardev=" + DevToolsCharID + ",name=" + DevToolsPortName,
		"virtio-blk-pci,id=" + DiskDeviceID + ",drive=" + DiskNodeID + ",bus=pcie.0,addr=0x4",
		"virtio-net-pci,id=net0,netdev=" + NetdevID + ",mac=" + GuestMAC + ",bus=pcie.0,addr=0x5",
		"isa-serial,id=serial0,chardev=" + SerialCharID,
		"vmgenid,id=vmgenid0",
	}, volumeRootPorts()...)
}

// VideoMemoryMiB is the VGA's video memory for a screen: room for two
// frames at 32 bits a pixel, which the guest's bochs driver asks of a mode
// before it offers it (at 8 MiB the guest lists modes up to 1360x768, the
// largest under a megapixel), in the power of two QEMU rounds it up to.
// Every clone holds its own copy, and the guest writes all of it, so it is
// no larger: 8 MiB at 1280x800, where the fixed 16 MiB of earlier bakes
// left half unused (and a screen over two megapixels, such as 1920x1200,
// without a mode).
func VideoMemoryMiB(width, height int) int {
	const mib = 1 << 20
	need := 2 * width * height * 4
	n := 1
	for n*mib < need {
		n *= 2
	}
	return n
}

// BakeShape is the machine a bake of spec boots on a host of shape host:
// the host's QEMU build, accelerator, machine type and CPU model, the
// spec's CPUs, memory and resolution, and the device list at that
// resolution. The snapshot's manifest records it, and every restore must
// reproduce it.
func BakeShape(host desktop.MachineShape, spec desktop.BootSpec) desktop.MachineShape {
	s := host
	s.CPUs, s.MemoryMiB = spec.CPUs, spec.MemoryMiB
	s.Width, s.Height = spec.Image.Width, spec.Image.Height
	s.Devices = DeviceArgs(s.Width, s.Height)
	return s
}

// KernelBoot is the direct kernel boot of a guest image.
func KernelBoot(img desktop.BootImage) *Boot {
	return &Boot{Kernel: img.Kernel, Initrd: img.Initrd, Cmdline: img.Cmdline}
}

// Memory says where guest RAM lives.
type Memory struct {
	// Path of a file backing RAM; empty means anonymous RAM (a full
	// restore, such as a wake from hibernation).
	Path string
	// Share maps the file shared (a template: the guest's writes land in
	// the file) or private (a clone: copy-on-write, the file is never
	// written).
	Share bool
}

// Boot is a direct kernel boot.
type Boot struct {
	Kernel, Initrd, Cmdline string
}

// MemoryObject is the -object value of guest RAM of mib MiB: a file
// backend on mem.Path, or anonymous RAM. Do not add readonly=on to a
// clone's private mapping: the AHCI state then fails to load.
func MemoryObject(mem Memory, mib int) string {
	size := strconv.Itoa(mib) + "M"
	if mem.Path == "" {
		return "memory-backend-ram,id=" + MemoryBackendID + ",size=" + size
	}
	share := "off"
	if mem.Share {
		share = "on"
	}
	return "memory-backend-file,id=" + MemoryBackendID + ",size=" + size + ",mem-path=" + Escape(mem.Path) + ",share=" + share
}

// NetdevKind is the NIC backend every machine has, recorded in snapshot
// shapes: a backend's state is part of the migration stream, so a snapshot
// restores only with the backend it was baked with.
const NetdevKind = "stream"

// Netdev is the -netdev value of the NIC's backend: a stream socket QEMU
// listens on at path, carrying the guest's Ethernet frames to hostd's
// egress network (package egress), which is the guest's only way out.
// Until hostd connects, the link is down and frames go nowhere.
func Netdev(path string) string {
	return "stream,id=" + NetdevID + ",server=on,addr.type=unix,addr.path=" + Escape(path)
}

// NICSocket is the file name of the NIC's stream socket in a machine's
// run directory.
const NICSocket = "nic.sock"

// Escape doubles commas, QEMU's escape inside an option value.
func Escape(v string) string { return strings.ReplaceAll(v, ",", ",,") }
