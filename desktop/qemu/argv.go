package qemu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop"
)

// Fixed names that the device list refers to. A restore needs the same
// devices as the bake, and the devices refer to their backends by these ids,
// so they never change.
const (
	memoryBackendID = "mem0"
	diskNodeID      = "disk0"
	agentCharID     = "charchannel0"
	serialCharID    = "charserial0"
	netdevID        = "hostnet0"
	monitorCharID   = "charmonitor"
	agentPortName   = "org.qemu.guest_agent.0"
	// guestMAC is the same in every clone: each clone has its own user-mode
	// network, so they never meet.
	guestMAC = "52:54:00:77:64:01"
)

// DeviceArgs is the device list of a new bake at the given resolution: std
// VGA (the guest's Xorg drives it with modesetting; its EDID offers the
// resolution), a USB tablet for absolute pointer input, the guest agent on
// virtio-serial, the disk, a NIC whose backend decides whether there is any
// network, a serial console, and vmgenid so every clone reseeds its RNG.
// PCI addresses are explicit so another driver (libvirt) can reproduce the
// same machine.
func DeviceArgs(width, height int) []string {
	return []string{
		fmt.Sprintf("VGA,id=video0,vgamem_mb=16,xres=%d,yres=%d,bus=pcie.0,addr=0x1", width, height),
		"qemu-xhci,id=usb,bus=pcie.0,addr=0x2",
		"usb-tablet,id=input0,bus=usb.0,port=1",
		"virtio-serial-pci,id=virtio-serial0,bus=pcie.0,addr=0x3",
		"virtserialport,id=channel0,bus=virtio-serial0.0,nr=1,chardev=" + agentCharID + ",name=" + agentPortName,
		"virtio-blk-pci,id=virtio-disk0,drive=" + diskNodeID + ",bus=pcie.0,addr=0x4",
		"virtio-net-pci,id=net0,netdev=" + netdevID + ",mac=" + guestMAC + ",bus=pcie.0,addr=0x5",
		"isa-serial,id=serial0,chardev=" + serialCharID,
		"vmgenid,id=vmgenid0",
	}
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

// Config is everything a QEMU command line is built from.
type Config struct {
	Binary string
	Name   string
	Shape  desktop.MachineShape
	Memory Memory
	Boot   *Boot // nil for a restore
	Disk   string
	// MonitorFD is the QMP listening socket's descriptor number in the child.
	MonitorFD int
	VNC       string // unix socket path
	Agent     string // unix socket path
	Console   string // unix socket path the serial console is served on
	// ConsoleLog receives everything the guest prints on its console.
	ConsoleLog string
	Network    bool
	// Incoming starts QEMU waiting for migrate-incoming.
	Incoming bool
	// Sandbox turns on QEMU's seccomp sandbox with every deny option.
	Sandbox bool
}

// Argv builds QEMU's command line (without the binary). It is a pure
// function of its Config; the golden tests pin its output.
func Argv(c Config) []string {
	s := c.Shape
	accel := "tcg,thread=multi"
	if s.Accel == "kvm" {
		accel = "kvm"
	}
	mib := strconv.Itoa(s.MemoryMiB) + "M"
	var memory string
	if c.Memory.Path != "" {
		share := "off"
		if c.Memory.Share {
			share = "on"
		}
		memory = "memory-backend-file,id=" + memoryBackendID + ",size=" + mib + ",mem-path=" + escape(c.Memory.Path) + ",share=" + share
	} else {
		memory = "memory-backend-ram,id=" + memoryBackendID + ",size=" + mib
	}
	restrict := "on"
	if c.Network {
		restrict = "off"
	}
	a := []string{
		"-name", "guest=" + escape(c.Name) + ",debug-threads=on",
		"-nodefaults", "-no-user-config",
		"-msg", "timestamp=on",
		"-accel", accel,
		"-machine", s.Type + ",memory-backend=" + memoryBackendID,
		"-cpu", s.CPU,
		"-smp", strconv.Itoa(s.CPUs),
		"-m", mib,
		"-object", memory,
	}
	if c.Boot != nil {
		a = append(a, "-kernel", c.Boot.Kernel, "-initrd", c.Boot.Initrd, "-append", c.Boot.Cmdline)
	}
	a = append(a,
		"-blockdev", "driver=qcow2,node-name="+diskNodeID+",discard=unmap,file.driver=file,file.filename="+escape(c.Disk),
		"-chardev", "socket,id="+agentCharID+",path="+escape(c.Agent)+",server=on,wait=off",
		"-chardev", "socket,id="+serialCharID+",path="+escape(c.Console)+",server=on,wait=off,logfile="+escape(c.ConsoleLog)+",logappend=on",
		// restrict=on: the guest has a NIC but reaches nothing, not even the host.
		"-netdev", "user,id="+netdevID+",restrict="+restrict,
	)
	for _, d := range s.Devices {
		a = append(a, "-device", d)
	}
	a = append(a,
		"-chardev", "socket,id="+monitorCharID+",fd="+strconv.Itoa(c.MonitorFD)+",server=on,wait=off",
		"-mon", "chardev="+monitorCharID+",mode=control",
		"-display", "none",
		// VNC only on a unix socket in the desktop's 0700 directory; never TCP.
		// force-shared: a client asking for exclusive access cannot cut off
		// the others (the mirror, other viewers).
		"-vnc", "unix:"+escape(c.VNC)+",share=force-shared",
	)
	if c.Sandbox {
		a = append(a, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny")
	}
	if c.Incoming {
		a = append(a, "-incoming", "defer")
	}
	return a
}

// escape doubles commas, QEMU's escape inside an option value.
func escape(v string) string { return strings.ReplaceAll(v, ",", ",,") }
