package libvirt

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// MetadataURI is the namespace of the element hostd writes into the
// <metadata> of every domain it defines. A domain without it, or with
// another desktop's id in it, is never touched.
const MetadataURI = "https://github.com/warmdesk/warmdesk/libvirt/1"

// Roles of hostd's domains, written in their metadata.
const (
	RoleDesktop  = "desktop"  // a desktop's machine
	RoleBake     = "bake"     // a cold boot being baked into a snapshot
	RoleTemplate = "template" // a transient copy a running desktop's snapshot goes through
)

// Meta is what hostd records in a domain's <metadata>.
type Meta struct {
	ID   string `xml:"id,attr"`
	Role string `xml:"role,attr"`
}

// DomainConfig is everything a domain's XML is built from.
type DomainConfig struct {
	Name     string
	UUID     string
	Meta     Meta
	Emulator string
	// Shape is the machine: accelerator, machine type, CPU, memory,
	// resolution and the shared device list (qemuvm.DeviceArgs), which the
	// XML must reproduce device for device.
	Shape  desktop.MachineShape
	Memory qemuvm.Memory
	Boot   *qemuvm.Boot // nil for a restore
	Disk   string
	// Volumes are hot-plugged volumes a restored state holds (a wake).
	Volumes []desktop.VolumeDisk
	// VNC and Console are unix socket paths in the machine's 0700 run
	// directory; ConsoleLog receives the guest's serial console.
	// NIC is the unix socket QEMU serves the NIC's frames on (egress).
	// DevTools is where the DevTools bridge's port socket is bound.
	VNC, Console, ConsoleLog, NIC, DevTools string
	// Incoming starts QEMU waiting for migrate-incoming; with
	// IncomingSocket, QEMU listens on that unix socket from its start
	// instead (-incoming unix:PATH), bound before it drops root.
	Incoming       bool
	IncomingSocket string
	// RunAs, when set, is the user QEMU drops to at the end of its start,
	// once it has opened its files and bound its sockets as root (-runas),
	// under hostd's own seccomp sandbox, which then allows that one switch.
	// libvirt's own sandbox must be off (qemu.conf seccomp_sandbox = 0):
	// it comes later on the command line and would forbid it.
	RunAs *qemuvm.Owner
}

// CheckDevices tells whether a shape's device list is one this driver can
// express in domain XML: exactly the shared list (qemuvm.DeviceArgs) at the
// shape's resolution. Anything else (a snapshot from another version of
// hostd) is refused rather than restored into a different machine.
func CheckDevices(s desktop.MachineShape) error {
	want := qemuvm.DeviceArgs(s.Width, s.Height)
	if !slices.Equal(s.Devices, want) {
		return fmt.Errorf("%w: device list %q is not the one the libvirt driver reproduces (%q): re-bake the snapshot with this hostd",
			desktop.ErrMismatch, s.Devices, want)
	}
	return nil
}

// DomainXML builds a domain's XML. It is a pure function of its config;
// the golden tests pin its output, and the end-to-end tests check that
// the QEMU libvirt starts from it has the QEMU driver's devices.
//
// libvirt describes every device natively, at the PCI addresses the QEMU
// driver's device list gives, so libvirt's aliases come out as the device
// ids the QEMU driver uses. What libvirt cannot say goes on
// <qemu:commandline> (which taints the domain):
//   - guest RAM as memory-backend-file on the snapshot's memory file, and a
//     second -machine memory-backend= that overrides libvirt's own backend
//     (libvirt's stays unused, so it is neither touched nor migrated);
//   - -incoming defer, so hostd drives the restore over QMP;
//   - the NIC: its backend is a stream socket served to hostd's egress
//     network, which libvirt's interface types cannot express.
//   - hostd's own seccomp sandbox, and for a desktop that runs as an id of
//     its own, -runas and -incoming unix:PATH (bound before the switch).
func DomainXML(c DomainConfig) ([]byte, error) {
	s := c.Shape
	if err := CheckDevices(s); err != nil {
		return nil, err
	}
	nic := deviceWithDriver(s.Devices, "virtio-net-pci")
	typ := "qemu" // TCG
	cpu := cpuXML{Mode: "maximum", Check: "none"}
	switch s.Accel {
	case "kvm":
		typ = "kvm"
		cpu = cpuXML{Mode: "host-passthrough", Check: "none", Migratable: "on"}
	case "tcg":
	default:
		return nil, fmt.Errorf("%w: accelerator %q", desktop.ErrInvalid, s.Accel)
	}
	if s.CPU != "max" && s.CPU != "host" {
		return nil, fmt.Errorf("%w: CPU model %q: the libvirt driver knows max (TCG) and host (KVM)", desktop.ErrMismatch, s.CPU)
	}
	// QEMU's -smp N on q35 7.x means one socket of N cores; libvirt says
	// so only with an explicit topology.
	cpu.Topology = &topologyXML{Sockets: 1, Dies: 1, Cores: s.CPUs, Threads: 1}

	args := []string{"-object", qemuvm.MemoryObject(c.Memory, s.MemoryMiB), "-machine", "memory-backend=" + qemuvm.MemoryBackendID}

	d := domainXML{
		Type:      typ,
		XMLNSQEMU: "http://libvirt.org/schemas/domain/qemu/1.0",
		Name:      c.Name,
		UUID:      c.UUID,
		Metadata:  metadataXML{Machine: metaXML{XMLNS: MetadataURI, Meta: c.Meta}},
		Memory:    sizeXML{Unit: "MiB", Value: s.MemoryMiB},
		VCPU:      s.CPUs,
		OS:        osXML{Type: osTypeXML{Arch: "x86_64", Machine: s.Type, Value: "hvm"}},
		Features:  featuresXML{ACPI: &struct{}{}, APIC: &struct{}{}},
		CPU:       cpu,
		Clock:     clockXML{Offset: "utc"},
		// A guest that powers off or crashes ends; one that reboots
		// restarts in the same QEMU, as under the QEMU driver.
		OnPoweroff: "destroy", OnReboot: "restart", OnCrash: "destroy",
		GenID: &struct{}{}, // vmgenid: every clone reseeds its RNG
	}
	if c.Boot != nil {
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = c.Boot.Kernel, c.Boot.Initrd, c.Boot.Cmdline
	}
	dev := &d.Devices
	dev.Emulator = c.Emulator
	dev.Disks = []diskXML{{
		Type: "file", Device: "disk",
		Driver:  driverXML{Name: "qemu", Type: "qcow2", Discard: "unmap"},
		Source:  sourceXML{File: c.Disk},
		Target:  targetXML{Dev: "vda", Bus: "virtio"},
		Address: pci(4),
	}}
	for _, v := range c.Volumes {
		dev.Disks = append(dev.Disks, VolumeDiskXML(v))
	}
	dev.Controllers = []controllerXML{
		{Type: "pci", Index: 0, Model: "pcie-root"},
		// No USB: the pointer is a virtio tablet. Without this libvirt
		// would add a default USB controller the QEMU driver's machine lacks.
		{Type: "usb", Index: 0, Model: "none"},
		{Type: "virtio-serial", Index: 0, Address: pci(3)},
	}
	// The volumes' hot-plug slots, as the QEMU driver's device list has
	// them; libvirt numbers the ports' buses 1 up.
	for slot := range qemuvm.VolumeSlots {
		dev.Controllers = append(dev.Controllers, controllerXML{
			Type: "pci", Index: slot + 1, Model: "pcie-root-port",
			Target:  &controllerTargetXML{Chassis: qemuvm.VolumePortChassis(slot), Port: fmt.Sprint(qemuvm.VolumePortNumber(slot))},
			Address: pci(qemuvm.VolumePortSlot(slot)),
		})
	}
	dev.Serials = []serialXML{{
		Type:   "unix",
		Source: &chardevSourceXML{Mode: "bind", Path: c.Console},
		Log:    &logXML{File: c.ConsoleLog, Append: "on"},
		Target: &serialTargetXML{Type: "isa-serial", Port: "0", Model: &modelNameXML{Name: "isa-serial"}},
	}}
	// libvirt binds the agent's socket itself (under its own state
	// directory) and speaks to it for QEMUDomainAgentCommand.
	dev.Channels = []serialXML{{
		Type:    "unix",
		Source:  &chardevSourceXML{Mode: "bind"},
		Target:  &serialTargetXML{Type: "virtio", Name: qemuvm.AgentPortName},
		Address: &addressXML{Type: "virtio-serial", Controller: "0", Bus: "0", Port: "1"},
	}, {
		Type:    "unix",
		Source:  &chardevSourceXML{Mode: "bind", Path: c.DevTools},
		Target:  &serialTargetXML{Type: "virtio", Name: qemuvm.DevToolsPortName},
		Address: &addressXML{Type: "virtio-serial", Controller: "0", Bus: "0", Port: "2"},
	}}
	dev.Inputs = []inputXML{{Type: "tablet", Bus: "virtio", Address: pci(2)}}
	// VNC only on a unix socket in the machine's 0700 run directory, never
	// TCP; force-shared so no client can cut the others off.
	dev.Graphics = []graphicsXML{{Type: "vnc", SharePolicy: "force-shared", Listen: listenXML{Type: "socket", Socket: c.VNC}}}
	dev.Audio = []audioXML{{ID: 1, Type: "none"}}
	dev.Video = []videoXML{{
		Model: videoModelXML{
			Type: "vga", VRAM: deviceInt(deviceWithDriver(s.Devices, "VGA"), "vgamem_mb") * 1024, Heads: 1, Primary: "yes",
			Resolution: &resolutionXML{X: s.Width, Y: s.Height},
		},
		Address: pci(1),
	}}
	dev.Memballoon = &memballoonXML{Model: "none"} // a balloon would punch holes in the shared memory file
	args = append(args, "-netdev", qemuvm.Netdev(c.NIC), "-device", nic)
	switch {
	case c.Incoming && c.IncomingSocket != "":
		args = append(args, "-incoming", "unix:"+c.IncomingSocket)
	case c.Incoming:
		args = append(args, "-incoming", "defer")
	}
	// hostd's own sandbox, whatever libvirt's qemu.conf says (libvirt's
	// comes later on the command line, a filter of its own on top).
	if c.RunAs != nil {
		args = append(args, "-sandbox", qemuvm.SandboxRunAs, "-runas", c.RunAs.RunAs())
	} else {
		args = append(args, "-sandbox", qemuvm.Sandbox)
	}
	for _, a := range args {
		d.Commandline.Args = append(d.Commandline.Args, qemuArgXML{Value: a})
	}
	out, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("domain xml: %w", err)
	}
	return append(out, '\n'), nil
}

// VolumeAlias is libvirt's alias of a volume slot's disk, which QEMU sees
// as its device id: the QEMU driver's id for it.
func VolumeAlias(slot int) string { return qemuvm.VolumeDeviceID(slot) }

// VolumeDiskXML is a volume's disk: its top layer (libvirt follows the
// backing chain the layers' headers name), in its slot's root port (bus
// slot+1), with the serial the guest finds it by.
func VolumeDiskXML(v desktop.VolumeDisk) diskXML {
	d := diskXML{
		Type: "file", Device: "disk",
		Driver:  driverXML{Name: "qemu", Type: "qcow2", Discard: "unmap"},
		Source:  sourceXML{File: v.Layers[len(v.Layers)-1]},
		Target:  targetXML{Dev: "vd" + string(rune('b'+v.Slot)), Bus: "virtio"},
		Serial:  v.Serial,
		Alias:   &aliasXML{Name: VolumeAlias(v.Slot)},
		Address: &addressXML{Type: "pci", Domain: "0x0000", Bus: fmt.Sprintf("0x%02x", v.Slot+1), Slot: "0x00", Function: "0x0"},
	}
	if v.ReadOnly {
		d.ReadOnly = &struct{}{}
	}
	return d
}

func pci(slot int) *addressXML {
	return &addressXML{Type: "pci", Domain: "0x0000", Bus: "0x00", Slot: fmt.Sprintf("0x%02x", slot), Function: "0x0"}
}

// deviceWithDriver finds the device argument of a QEMU device driver.
func deviceWithDriver(devices []string, driver string) string {
	for _, d := range devices {
		if strings.HasPrefix(d, driver+",") {
			return d
		}
	}
	return ""
}

// deviceProp reads key=value out of a -device argument.
func deviceProp(device, key string) string {
	for _, kv := range strings.Split(device, ",")[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func deviceInt(device, key string) int {
	n, _ := strconv.Atoi(deviceProp(device, key))
	return n
}

// The XML shapes, as libvirt's domain schema names them.

type domainXML struct {
	XMLName     xml.Name       `xml:"domain"`
	Type        string         `xml:"type,attr"`
	XMLNSQEMU   string         `xml:"xmlns:qemu,attr"`
	Name        string         `xml:"name"`
	UUID        string         `xml:"uuid,omitempty"`
	Metadata    metadataXML    `xml:"metadata"`
	Memory      sizeXML        `xml:"memory"`
	VCPU        int            `xml:"vcpu"`
	OS          osXML          `xml:"os"`
	Features    featuresXML    `xml:"features"`
	CPU         cpuXML         `xml:"cpu"`
	Clock       clockXML       `xml:"clock"`
	OnPoweroff  string         `xml:"on_poweroff"`
	OnReboot    string         `xml:"on_reboot"`
	OnCrash     string         `xml:"on_crash"`
	GenID       *struct{}      `xml:"genid"`
	Devices     devicesXML     `xml:"devices"`
	Commandline commandlineXML `xml:"qemu:commandline"`
}

type metadataXML struct {
	Machine metaXML `xml:"warmdesk:machine"`
}

type metaXML struct {
	XMLNS string `xml:"xmlns:warmdesk,attr"`
	Meta
}

type sizeXML struct {
	Unit  string `xml:"unit,attr"`
	Value int    `xml:",chardata"`
}

type osXML struct {
	Type    osTypeXML `xml:"type"`
	Kernel  string    `xml:"kernel,omitempty"`
	Initrd  string    `xml:"initrd,omitempty"`
	Cmdline string    `xml:"cmdline,omitempty"`
}

type osTypeXML struct {
	Arch    string `xml:"arch,attr"`
	Machine string `xml:"machine,attr"`
	Value   string `xml:",chardata"`
}

type featuresXML struct {
	ACPI *struct{} `xml:"acpi"`
	APIC *struct{} `xml:"apic"`
}

type cpuXML struct {
	Mode       string       `xml:"mode,attr"`
	Check      string       `xml:"check,attr,omitempty"`
	Migratable string       `xml:"migratable,attr,omitempty"`
	Topology   *topologyXML `xml:"topology"`
}

type topologyXML struct {
	Sockets int `xml:"sockets,attr"`
	Dies    int `xml:"dies,attr"`
	Cores   int `xml:"cores,attr"`
	Threads int `xml:"threads,attr"`
}

type clockXML struct {
	Offset string `xml:"offset,attr"`
}

type devicesXML struct {
	Emulator    string          `xml:"emulator"`
	Disks       []diskXML       `xml:"disk"`
	Controllers []controllerXML `xml:"controller"`
	Serials     []serialXML     `xml:"serial"`
	Channels    []serialXML     `xml:"channel"`
	Inputs      []inputXML      `xml:"input"`
	Graphics    []graphicsXML   `xml:"graphics"`
	Audio       []audioXML      `xml:"audio"`
	Video       []videoXML      `xml:"video"`
	Memballoon  *memballoonXML  `xml:"memballoon"`
}

type diskXML struct {
	XMLName  xml.Name    `xml:"disk"`
	Type     string      `xml:"type,attr"`
	Device   string      `xml:"device,attr"`
	Driver   driverXML   `xml:"driver"`
	Source   sourceXML   `xml:"source"`
	Target   targetXML   `xml:"target"`
	Serial   string      `xml:"serial,omitempty"`
	ReadOnly *struct{}   `xml:"readonly"`
	Alias    *aliasXML   `xml:"alias"`
	Address  *addressXML `xml:"address"`
}

type aliasXML struct {
	Name string `xml:"name,attr"`
}

type driverXML struct {
	Name    string `xml:"name,attr"`
	Type    string `xml:"type,attr"`
	Discard string `xml:"discard,attr,omitempty"`
}

type sourceXML struct {
	File string `xml:"file,attr"`
}

type targetXML struct {
	Dev string `xml:"dev,attr"`
	Bus string `xml:"bus,attr"`
}

type addressXML struct {
	Type       string `xml:"type,attr"`
	Domain     string `xml:"domain,attr,omitempty"`
	Controller string `xml:"controller,attr,omitempty"`
	Bus        string `xml:"bus,attr,omitempty"`
	Slot       string `xml:"slot,attr,omitempty"`
	Function   string `xml:"function,attr,omitempty"`
	Port       string `xml:"port,attr,omitempty"`
}

type controllerXML struct {
	Type    string               `xml:"type,attr"`
	Index   int                  `xml:"index,attr"`
	Model   string               `xml:"model,attr,omitempty"`
	Target  *controllerTargetXML `xml:"target"`
	Address *addressXML          `xml:"address"`
}

type controllerTargetXML struct {
	Chassis int    `xml:"chassis,attr"`
	Port    string `xml:"port,attr"`
}

type modelNameXML struct {
	Name string `xml:"name,attr"`
}

type serialXML struct {
	Type    string            `xml:"type,attr"`
	Source  *chardevSourceXML `xml:"source"`
	Log     *logXML           `xml:"log"`
	Target  *serialTargetXML  `xml:"target"`
	Address *addressXML       `xml:"address"`
}

type chardevSourceXML struct {
	Mode string `xml:"mode,attr"`
	Path string `xml:"path,attr,omitempty"`
}

type logXML struct {
	File   string `xml:"file,attr"`
	Append string `xml:"append,attr"`
}

type serialTargetXML struct {
	Type  string        `xml:"type,attr"`
	Port  string        `xml:"port,attr,omitempty"`
	Name  string        `xml:"name,attr,omitempty"`
	Model *modelNameXML `xml:"model"`
}

type inputXML struct {
	Type    string      `xml:"type,attr"`
	Bus     string      `xml:"bus,attr"`
	Address *addressXML `xml:"address"`
}

type graphicsXML struct {
	Type        string    `xml:"type,attr"`
	SharePolicy string    `xml:"sharePolicy,attr"`
	Listen      listenXML `xml:"listen"`
}

type listenXML struct {
	Type   string `xml:"type,attr"`
	Socket string `xml:"socket,attr"`
}

type audioXML struct {
	ID   int    `xml:"id,attr"`
	Type string `xml:"type,attr"`
}

type videoXML struct {
	Model   videoModelXML `xml:"model"`
	Address *addressXML   `xml:"address"`
}

type videoModelXML struct {
	Type       string         `xml:"type,attr"`
	VRAM       int            `xml:"vram,attr"`
	Heads      int            `xml:"heads,attr"`
	Primary    string         `xml:"primary,attr"`
	Resolution *resolutionXML `xml:"resolution"`
}

type resolutionXML struct {
	X int `xml:"x,attr"`
	Y int `xml:"y,attr"`
}

type memballoonXML struct {
	Model string `xml:"model,attr"`
}

type commandlineXML struct {
	Args []qemuArgXML `xml:"qemu:arg"`
}

type qemuArgXML struct {
	Value string `xml:"value,attr"`
}
