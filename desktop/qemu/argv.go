package qemu

import (
	"strconv"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Config is everything a QEMU command line is built from.
type Config struct {
	Binary string
	Name   string
	Shape  desktop.MachineShape
	Memory qemuvm.Memory
	Boot   *qemuvm.Boot // nil for a restore
	Disk   string
	// MonitorFD is the QMP listening socket's descriptor number in the child.
	MonitorFD int
	VNC       string // unix socket path
	Agent     string // unix socket path
	// DevTools is the unix socket path of the DevTools bridge's port.
	DevTools string
	Console  string // unix socket path the serial console is served on
	// NIC is the unix socket path QEMU serves the NIC's frames on.
	NIC string
	// Volumes are hot-plugged volumes a restored state holds (a wake), with
	// each one's layer descriptors in the child.
	Volumes []VolumeFDs
	// Incoming starts QEMU waiting for migrate-incoming.
	Incoming bool
	// Paused keeps the guest stopped after an incoming migration, even
	// one from a running source, until cont (-S).
	Paused bool
	// Sandbox turns on QEMU's seccomp sandbox with every deny option.
	Sandbox bool
	// RunAs, when set, is the user QEMU becomes once it has opened the files
	// on its command line, before it runs the guest or reads a migration
	// stream (-runas).
	RunAs *qemuvm.Owner
}

// VolumeFDs is a volume and the descriptor numbers each of its layers
// has in QEMU.
type VolumeFDs struct {
	Disk desktop.VolumeDisk
	FDs  [][]int
}

// Argv builds QEMU's command line (without the binary). It is a pure
// function of its Config; the golden tests pin its output.
func Argv(c Config) []string {
	s := c.Shape
	accel := "tcg,thread=multi"
	if s.Accel == "kvm" {
		accel = "kvm"
	}
	a := []string{
		"-name", "guest=" + qemuvm.Escape(c.Name) + ",debug-threads=on",
		"-nodefaults", "-no-user-config",
		"-msg", "timestamp=on",
		"-accel", accel,
		"-machine", s.Type + ",memory-backend=" + qemuvm.MemoryBackendID,
		"-cpu", s.CPU,
		"-smp", strconv.Itoa(s.CPUs),
		"-m", strconv.Itoa(s.MemoryMiB) + "M",
		"-object", qemuvm.MemoryObject(c.Memory, s.MemoryMiB),
	}
	if c.Boot != nil {
		a = append(a, "-kernel", c.Boot.Kernel, "-initrd", c.Boot.Initrd, "-append", c.Boot.Cmdline)
	}
	a = append(a,
		"-blockdev", "driver=qcow2,node-name="+qemuvm.DiskNodeID+",discard=unmap,file.driver=file,file.filename="+qemuvm.Escape(c.Disk),
		"-chardev", "socket,id="+qemuvm.AgentCharID+",path="+qemuvm.Escape(c.Agent)+",server=on,wait=off",
		"-chardev", "socket,id="+qemuvm.DevToolsCharID+",path="+qemuvm.Escape(c.DevTools)+",server=on,wait=off",
		// The console's log is hostd's to write (capped), not QEMU's: a
		// guest printing without end would fill the host's disk.
		"-chardev", "socket,id="+qemuvm.SerialCharID+",path="+qemuvm.Escape(c.Console)+",server=on,wait=off",
		// The NIC's only backend is a socket hostd's egress network serves:
		// whatever the guest's policy, nothing else carries its packets.
		"-netdev", qemuvm.Netdev(c.NIC),
	)
	for _, d := range s.Devices {
		a = append(a, "-device", d)
	}
	for _, v := range c.Volumes {
		a = append(a, qemuvm.VolumeArgs(v.Disk, v.FDs)...)
	}
	a = append(a,
		"-chardev", "socket,id="+qemuvm.MonitorCharID+",fd="+strconv.Itoa(c.MonitorFD)+",server=on,wait=off",
		"-mon", "chardev="+qemuvm.MonitorCharID+",mode=control",
		"-display", "none",
		// VNC only on a unix socket in the desktop's 0700 directory; never TCP.
		// force-shared: a client asking for exclusive access cannot cut off
		// the others (the mirror, other viewers).
		"-vnc", "unix:"+qemuvm.Escape(c.VNC)+",share=force-shared",
	)
	if c.RunAs != nil {
		a = append(a, "-runas", c.RunAs.RunAs())
	}
	if c.Sandbox {
		sandbox := qemuvm.Sandbox
		if c.RunAs != nil {
			sandbox = qemuvm.SandboxRunAs
		}
		a = append(a, "-sandbox", sandbox)
	}
	if c.Incoming {
		a = append(a, "-incoming", "defer")
	}
	if c.Paused {
		a = append(a, "-S")
	}
	return a
}
