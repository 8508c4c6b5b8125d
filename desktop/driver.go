package desktop

import (
	"context"
	"encoding/json"
	"image"
	"net"
	"time"
)

// Driver runs machines on one kind of hypervisor: QEMU processes directly
// (desktop/qemu) or through libvirtd (desktop/libvirt). The Manager owns
// every desktop's lifetime; a driver only does what it is told, and every
// machine it starts can be found again from its Record after hostd restarts.
type Driver interface {
	// Name is the driver's name, recorded with each desktop ("qemu", "libvirt").
	Name() string
	// Shape is the machine shape this host restores into (QEMU build and
	// accelerator); snapshots baked with another are refused.
	Shape() MachineShape
	// Boot cold-boots a guest image into a template machine whose RAM is a
	// shared file, so that Snapshot can save it. Only for baking.
	Boot(ctx context.Context, spec BootSpec) (Machine, error)
	// Restore starts a machine from a snapshot, or wakes a hibernated one.
	Restore(ctx context.Context, spec RestoreSpec) (Machine, error)
	// Attach finds a machine again after a restart of hostd, from its record.
	// It fails with ErrNotFound when the machine is gone.
	Attach(ctx context.Context, record json.RawMessage) (Machine, error)
	// Cleanup removes what a machine that is gone left behind (files,
	// hypervisor definitions), from its record.
	Cleanup(ctx context.Context, record json.RawMessage) error
}

// Sweeper is implemented by drivers that can find their machines without
// a record: a crash between starting a machine and recording it (a create
// takes a pool machine, then restores, then records) leaves a running
// hypervisor that nothing else would end.
type Sweeper interface {
	// Sweep ends every desktop machine of this driver that none of the
	// records in owned names, removes its files, and reports the names of
	// what it swept.
	Sweep(ctx context.Context, owned []json.RawMessage) ([]string, error)
}

// Stopper is implemented by machines that can tell whether their CPUs are
// stopped: a fork or a snapshot stops its source for a moment, and a crash
// of hostd then leaves it stopped while its record says running; recovery
// resumes it.
type Stopper interface {
	Stopped(ctx context.Context) (bool, error)
}

// Warmer is implemented by drivers that keep machines ready ahead per
// snapshot (the QEMU driver's are restored and warmed up), so a create
// only hands one over.
type Warmer interface {
	// Warm keeps n machines ready for snapshot s (0 stops warming it).
	Warm(s Snapshot, n int)
	// PoolSize reports how many are ready now.
	PoolSize(snapshot string) int
	// WaitPool waits until at least n machines are ready for a snapshot.
	WaitPool(ctx context.Context, snapshot string, n int) error
}

// BootSpec describes a cold boot of a guest image for baking.
type BootSpec struct {
	Name      string
	Image     BootImage
	CPUs      int
	MemoryMiB int
	// Dir receives the snapshot files (memory, disk overlay) as the machine
	// runs; Snapshot later adds the device state.
	Dir string
	// ConsoleLine is called with each line the guest writes on its serial
	// console (the guest reports readiness there).
	ConsoleLine func(line string)
}

// BootImage is a bootable guest: kernel, initramfs and root disk.
type BootImage struct {
	Ref     ImageRef
	Kernel  string
	Initrd  string
	Disk    string // qcow2 base disk; the machine writes to an overlay on it
	Cmdline string
	Width   int
	Height  int
}

// RestoreSpec describes a machine to start from a snapshot.
type RestoreSpec struct {
	// ID names the desktop; drivers use it in their paths and definitions.
	ID       string
	Snapshot Snapshot
	// Hibernated, when set, is the record a Hibernate returned: the machine
	// wakes from its own full saved state instead of the snapshot's.
	Hibernated json.RawMessage
	DiskMiB    int
	// Volumes are volumes the snapshot's state already holds (a fork's
	// branches): QEMU starts with them where the state expects them.
	Volumes []VolumeDisk
}

// Committer is a Machine that keeps what recovery may need until the
// Manager's record names it: a woken QEMU machine stays paused, with the
// state it woke from kept, until Committed runs its guest and drops it.
type Committer interface {
	Committed(ctx context.Context) error
}

// HibernatedError is what Attach returns for a machine that a crash
// caught between its hibernation and the record saying so: its process
// is gone, its whole state is saved, and Record is its hibernated record.
type HibernatedError struct {
	Record json.RawMessage
}

func (e *HibernatedError) Error() string {
	return "the machine was hibernated and ended while its record still said running"
}

// Halter is a Machine that may pause its guest on its own: a QEMU machine
// whose disk reached its bound (disk_mib). Halted delivers the reason each
// time, after the guest's CPUs have stopped.
type Halter interface {
	Halted() <-chan string
}

// Machine is one running (or paused) virtual machine.
type Machine interface {
	// Record is what Attach and Cleanup need to find this machine again.
	Record() json.RawMessage
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Hibernate writes the full state to disk and ends the process. The
	// returned record wakes it through Driver.Restore.
	Hibernate(ctx context.Context) (json.RawMessage, error)
	// Snapshot writes a golden snapshot of this machine into dir (the
	// FileMemory, FileState and FileDisk files) and reports its shape. A
	// machine from Driver.Boot ends afterwards (resuming a template would
	// corrupt every clone); any other keeps running on a new disk overlay
	// layered on the snapshot's disk.
	Snapshot(ctx context.Context, dir string, opts SnapshotOptions) (MachineShape, error)
	// AdoptSnapshot tells the machine that the snapshot it just wrote is
	// committed: its disk now refers to the snapshot's frozen layer by the
	// snapshot's path, never by a file of its own that a later snapshot
	// could come to depend on.
	AdoptSnapshot(ctx context.Context, s Snapshot) error
	// Destroy ends the process and removes every file the machine owned.
	Destroy(ctx context.Context) error
	// Exited is closed when the machine's process ends for any reason;
	// ExitReason then says why (exit status, last lines of its log).
	Exited() <-chan struct{}
	ExitReason() string

	// SendInput delivers one synchronised frame of input events.
	SendInput(ctx context.Context, events []InputEvent) error
	// Screendump asks the hypervisor for a picture of the screen.
	Screendump(ctx context.Context) (image.Image, error)
	// Agent is the guest agent channel.
	Agent() GuestAgent
	// DialVNC opens a new connection to the machine's VNC server.
	DialVNC(ctx context.Context) (net.Conn, error)
	// DialNIC opens the NIC's frame stream (QEMU's stream netdev framing:
	// each Ethernet frame after its 4-byte big-endian length), for hostd's
	// egress network. One peer at a time; a new one replaces a closed one.
	DialNIC(ctx context.Context) (net.Conn, error)
	// Pid is the hypervisor process id, for memory accounting.
	Pid() int
	// VCPUTime is how long the guest's virtual CPUs have run, summed: it
	// advancing says the guest is still busy (idle CPUs halt).
	VCPUTime() (time.Duration, error)
}

// DevToolsDialer is a Machine with a DevTools bridge port: a virtio-serial
// port whose guest end carries connections to Chromium's debugging port
// (package devtools speaks its frames).
type DevToolsDialer interface {
	// DialDevTools connects to the port's host end. One peer at a time.
	DialDevTools(ctx context.Context) (net.Conn, error)
}

// SnapshotOptions say how a snapshot will be kept.
type SnapshotOptions struct {
	// Ephemeral snapshots (fork templates) live only as long as their
	// desktops, which a host reboot ends anyway: their memory may stay in
	// RAM (tmpfs) instead of being written to disk.
	Ephemeral bool
	// VolumeTops, by slot, are the new top layers the machine's read-write
	// volumes go on on at the snapshot's instant (a fork): each old top is
	// frozen, and the snapshot's state holds the volume devices, so every
	// restore of it needs a volume in those slots (RestoreSpec.Volumes).
	VolumeTops map[int]string
}

// GuestAgent sends qemu-guest-agent commands (QGA's JSON protocol).
type GuestAgent interface {
	// Call runs one command; args and result are JSON-encoded values (either
	// may be nil). It fails with ErrUnavailable when the agent does not answer
	// before ctx ends.
	Call(ctx context.Context, command string, args, result any) error
}

// InputKind says what an InputEvent does.
type InputKind int

// Input event kinds, after QEMU's input-send-event.
const (
	InputKey InputKind = iota + 1
	InputButton
	InputMove
)

// InputEvent is one low-level input event: keys by QEMU qcode, buttons by
// QEMU InputButton name, moves as absolute native pixels.
type InputEvent struct {
	Kind   InputKind
	Key    string
	Button string
	Down   bool
	X, Y   int
}

// VolumeDisk is a volume as a machine holds it: the qcow2 layers of its
// disk, base first, in one of the machine's hot-plug slots.
type VolumeDisk struct {
	Slot int `json:"slot"`
	// Serial is the disk's serial, how the guest finds it.
	Serial   string   `json:"serial"`
	Layers   []string `json:"layers"`
	ReadOnly bool     `json:"read_only,omitempty"`
	// SizeMiB is the volume's size.
	SizeMiB int `json:"size_mib,omitempty"`
}

// VolumeMachine is a Machine that takes volumes while it runs. A machine
// keeps its volumes in its record, so a wake brings them back.
type VolumeMachine interface {
	// AttachVolume hot-plugs a volume's disk; the guest mounts it.
	AttachVolume(ctx context.Context, v VolumeDisk) error
	// DetachVolume unplugs a slot's disk once the guest let it go.
	DetachVolume(ctx context.Context, slot int) error
	// Volumes are the volumes the machine holds now.
	Volumes() []VolumeDisk
}

// VolumeForker is a VolumeMachine whose snapshots carry its volumes
// (SnapshotOptions.VolumeTops), so a fork branches them.
type VolumeForker interface {
	ForksVolumes()
}
