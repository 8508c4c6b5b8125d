package libvirt

import (
	"encoding/xml"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testShape() desktop.MachineShape {
	return desktop.MachineShape{
		QEMUVersion: "7.2.22", QEMUSHA256: strings.Repeat("a", 64), Accel: "tcg", Type: "pc-q35-7.2", CPU: "max",
		CPUs: 2, MemoryMiB: 1024, Width: 1280, Height: 800, Devices: qemuvm.DeviceArgs(1280, 800),
	}
}

func cloneConfig() DomainConfig {
	return DomainConfig{
		Name: "warmdesk-d-1", UUID: "3d99048d-b2b7-43a1-b6f2-8f715ae09bfc",
		Meta:     Meta{ID: "d-1", Role: RoleDesktop},
		Emulator: "/usr/bin/qemu-system-x86_64", Shape: testShape(),
		Memory: qemuvm.Memory{Path: "/snap/minimal/memory"},
		Disk:   "/var/w/d-1/disk-0.qcow2",
		VNC:    "/run/w/d-1/vnc.sock", Console: "/run/w/d-1/console.sock", ConsoleLog: "/var/w/d-1/console.log", NIC: "/run/w/d-1/nic.sock", DevTools: "/run/w/d-1/cdp.sock",
		Incoming: true,
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("domain XML differs from %s (run go test -update after checking):\n%s", path, got)
	}
}

func mustXML(t *testing.T, c DomainConfig) []byte {
	t.Helper()
	b, err := DomainXML(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDomainXMLGoldenClone(t *testing.T) {
	golden(t, "clone.xml", mustXML(t, cloneConfig()))
}

func TestDomainXMLGoldenBake(t *testing.T) {
	golden(t, "bake.xml", mustXML(t, DomainConfig{
		Name: "warmdesk-bake-1", UUID: "0f6e1a56-35a4-4a3c-9a43-2b7b1b1d0c11",
		Meta:     Meta{ID: "bake-1", Role: RoleBake},
		Emulator: "/usr/bin/qemu-system-x86_64", Shape: testShape(),
		Memory: qemuvm.Memory{Path: "/snap/.draft-minimal/memory", Share: true},
		Boot:   &qemuvm.Boot{Kernel: "/img/vmlinuz", Initrd: "/img/initrd.img", Cmdline: "console=ttyS0 root=/dev/vda"},
		Disk:   "/snap/.draft-minimal/disk.qcow2",
		VNC:    "/run/w/bake-1/vnc.sock", Console: "/run/w/bake-1/console.sock", ConsoleLog: "/var/w/bake-1/console.log", NIC: "/run/w/bake-1/nic.sock", DevTools: "/run/w/bake-1/cdp.sock",
	}))
}

func TestDomainXMLGoldenWakeKVM(t *testing.T) {
	c := cloneConfig()
	c.Memory = qemuvm.Memory{} // anonymous: the RAM comes from the saved state
	c.Shape.Accel, c.Shape.CPU = "kvm", "host"
	golden(t, "wake-kvm.xml", mustXML(t, c))
}

// A desktop that runs as an id of its own drops to it with -runas under
// hostd's sandbox that allows the switch, and listens for its state from
// its start (it could not bind in its root-owned directory after).
func TestDomainXMLRunAs(t *testing.T) {
	c := cloneConfig()
	c.RunAs = &qemuvm.Owner{UID: 900065540, GID: 900065540}
	c.IncomingSocket = "/run/w/d-1/incoming.sock"
	args := strings.Join(commandline(t, mustXML(t, c)), " ")
	for _, want := range []string{"-sandbox " + qemuvm.SandboxRunAs, "-runas 900065540:900065540", "-incoming unix:/run/w/d-1/incoming.sock"} {
		if !strings.Contains(args, want) {
			t.Errorf("command line %q lacks %q", args, want)
		}
	}
	if strings.Contains(args, "defer") || strings.Contains(args, qemuvm.Sandbox) {
		t.Errorf("command line %q: -incoming defer or the sandbox that denies -runas", args)
	}
	// Without an id: hostd's full sandbox, whatever libvirt's qemu.conf says.
	args = strings.Join(commandline(t, mustXML(t, cloneConfig())), " ")
	if !strings.Contains(args, "-sandbox "+qemuvm.Sandbox) || strings.Contains(args, "-runas") {
		t.Errorf("unconfined command line %q", args)
	}
}

func TestLibvirtSandboxDenies(t *testing.T) {
	for log, want := range map[string]bool{
		"-sandbox on,elevateprivileges=allow \\\n-runas 9:9 \\\n-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny \\\n": true,
		"-sandbox on,elevateprivileges=allow \\\n-runas 9:9 \\\n-sandbox off \\\n":                                                false,
		"-sandbox on,obsolete=deny,elevateprivileges=deny \\\n":                                                                   false,
		"": false,
	} {
		if got := libvirtSandboxDenies(log); got != want {
			t.Errorf("libvirtSandboxDenies(%q) = %v, want %v", log, got, want)
		}
	}
}

// commandline returns the <qemu:commandline> arguments of a domain XML.
func commandline(t *testing.T, b []byte) []string {
	t.Helper()
	var d struct {
		Args []struct {
			Value string `xml:"value,attr"`
		} `xml:"http://libvirt.org/schemas/domain/qemu/1.0 commandline>arg"`
	}
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range d.Args {
		out = append(out, a.Value)
	}
	return out
}

// The NIC's backend is the egress stream socket in the machine's run
// directory, on the command line (libvirt's interfaces cannot express it),
// and libvirt adds no interface of its own.
func TestNICIsTheEgressStream(t *testing.T) {
	c := cloneConfig()
	b := mustXML(t, c)
	args := strings.Join(commandline(t, b), " ")
	if !strings.Contains(args, "-netdev "+qemuvm.Netdev(c.NIC)) || !strings.Contains(c.NIC, "nic.sock") {
		t.Errorf("no stream netdev on %s in the command line: %s", c.NIC, args)
	}
	if !strings.Contains(args, "-device "+deviceWithDriver(testShape().Devices, "virtio-net-pci")) {
		t.Errorf("the NIC is not the QEMU driver's: %s", args)
	}
	if strings.Contains(string(b), "<interface") {
		t.Errorf("libvirt was given an interface of its own:\n%s", b)
	}
}

func TestMemoryBackendOverridesLibvirts(t *testing.T) {
	args := commandline(t, mustXML(t, cloneConfig()))
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-object memory-backend-file,id=mem0,size=1024M,mem-path=/snap/minimal/memory,share=off",
		"-machine memory-backend=mem0",
		"-incoming defer",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("command line lacks %q: %s", want, joined)
		}
	}
	if strings.Contains(joined, "readonly") {
		t.Errorf("a clone's memory must not be readonly=on (the AHCI state fails to load): %s", joined)
	}
	c := cloneConfig()
	c.Memory.Path = "/a,b/memory"
	if j := strings.Join(commandline(t, mustXML(t, c)), " "); !strings.Contains(j, "mem-path=/a,,b/memory") {
		t.Errorf("comma not doubled: %s", j)
	}
}

func TestVNCOnlyOnAUnixSocket(t *testing.T) {
	b := mustXML(t, cloneConfig())
	var d struct {
		Graphics []struct {
			Type   string `xml:"type,attr"`
			Listen []struct {
				Type   string `xml:"type,attr"`
				Socket string `xml:"socket,attr"`
			} `xml:"listen"`
		} `xml:"devices>graphics"`
	}
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Graphics) != 1 || len(d.Graphics[0].Listen) != 1 || d.Graphics[0].Listen[0].Type != "socket" || d.Graphics[0].Listen[0].Socket != "/run/w/d-1/vnc.sock" {
		t.Errorf("graphics: %+v", d.Graphics)
	}
}

func TestXMLEscapesValues(t *testing.T) {
	c := cloneConfig()
	c.Disk = "/var/w/<a>&'\"/disk.qcow2"
	b := mustXML(t, c)
	var d struct {
		Source struct {
			File string `xml:"file,attr"`
		} `xml:"devices>disk>source"`
	}
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if d.Source.File != c.Disk {
		t.Errorf("disk path came back as %q", d.Source.File)
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	b := mustXML(t, cloneConfig())
	var d struct {
		Inner struct {
			XML string `xml:",innerxml"`
		} `xml:"metadata"`
	}
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	m, err := ParseMeta(d.Inner.XML)
	if err != nil {
		t.Fatal(err)
	}
	if m != (Meta{ID: "d-1", Role: RoleDesktop}) {
		t.Errorf("metadata came back as %+v", m)
	}
}

func TestParseMetaAsLibvirtReturnsIt(t *testing.T) {
	// libvirt's DomainGetMetadata (and virsh metadata) answer with the bare
	// element; a namespaced one must carry hostd's namespace.
	for _, in := range []string{
		`<machine id="d-1" role="desktop"/>`,
		`<warmdesk:machine xmlns:warmdesk="https://github.com/warmdesk/warmdesk/libvirt/1" id="d-1" role="desktop"/>`,
		`<x:machine xmlns:x="https://github.com/warmdesk/warmdesk/libvirt/1" id="d-1" role="desktop"></x:machine>`,
		`<machine xmlns="https://github.com/warmdesk/warmdesk/libvirt/1" id="d-1" role="desktop"/>`,
	} {
		m, err := ParseMeta(in)
		if err != nil || m.ID != "d-1" || m.Role != RoleDesktop {
			t.Errorf("ParseMeta(%s) = %+v, %v", in, m, err)
		}
	}
	for _, in := range []string{
		``,
		`<desktop id="d-1" role="desktop"/>`,
		`<w:machine xmlns:w="https://example.invalid/other" id="d-1" role="desktop"/>`,
		`<w:machine xmlns:w="https://github.com/warmdesk/warmdesk/libvirt/1" id="d-1" role="owner"/>`,
		`<w:machine xmlns:w="https://github.com/warmdesk/warmdesk/libvirt/1" id="" role="desktop"/>`,
		`<w:machine xmlns:w="https://github.com/warmdesk/warmdesk/libvirt/1" id="../x" role="desktop"/>`,
	} {
		if m, err := ParseMeta(in); err == nil {
			t.Errorf("ParseMeta(%s) = %+v, want an error", in, m)
		}
	}
}

func TestRefusesDevicesItCannotReproduce(t *testing.T) {
	c := cloneConfig()
	c.Shape.Devices = append(append([]string(nil), c.Shape.Devices...), "virtio-rng-pci,id=rng0")
	if _, err := DomainXML(c); !errors.Is(err, desktop.ErrMismatch) {
		t.Errorf("extra device: %v, want ErrMismatch", err)
	}
	c = cloneConfig()
	c.Shape.Devices = qemuvm.DeviceArgs(1024, 768) // another resolution than the shape's
	if _, err := DomainXML(c); !errors.Is(err, desktop.ErrMismatch) {
		t.Errorf("devices for another resolution: %v, want ErrMismatch", err)
	}
	c = cloneConfig()
	c.Shape.CPU = "Skylake-Client"
	if _, err := DomainXML(c); !errors.Is(err, desktop.ErrMismatch) {
		t.Errorf("unknown CPU model: %v, want ErrMismatch", err)
	}
}

func TestTopologyIsOneSocket(t *testing.T) {
	c := cloneConfig()
	c.Shape.CPUs = 4
	if b := mustXML(t, c); !strings.Contains(string(b), `<topology sockets="1" dies="1" cores="4" threads="1">`) {
		t.Errorf("topology:\n%s", b)
	}
}

func TestParseDomainCaps(t *testing.T) {
	c, err := parseDomainCaps(`<domainCapabilities>
  <path>/usr/bin/qemu-system-x86_64</path>
  <domain>qemu</domain>
  <machine>pc-q35-7.2</machine>
  <arch>x86_64</arch>
  <vcpu max='288'/>
</domainCapabilities>`)
	if err != nil || c.Path != "/usr/bin/qemu-system-x86_64" || c.Machine != "pc-q35-7.2" || c.Domain != "qemu" {
		t.Errorf("parseDomainCaps = %+v, %v", c, err)
	}
	if _, err := parseDomainCaps(`<domainCapabilities><domain>qemu</domain></domainCapabilities>`); err == nil {
		t.Error("capabilities without an emulator parsed")
	}
}
