package libvirt

import (
	"encoding/xml"
	"strings"
	"testing"
)

// Fuzz targets for everything the driver parses from libvirtd or QEMU.
// Each must never panic, and what it accepts must be well-formed.

func FuzzParseMeta(f *testing.F) {
	f.Add(`<machine id="d-1" role="desktop"/>`)
	f.Add(`<w:machine xmlns:w="` + MetadataURI + `" id="tmpl-1" role="template"></w:machine>`)
	f.Add(`<w:machine xmlns:w="https://example.invalid/x" id="d-1" role="desktop"/>`)
	f.Add(`<machine id="" role=""/>`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMeta(s)
		if err != nil {
			return
		}
		if m.ID == "" || strings.ContainsAny(m.ID, "/\x00") {
			t.Errorf("accepted id %q", m.ID)
		}
		if m.Role != RoleDesktop && m.Role != RoleBake && m.Role != RoleTemplate {
			t.Errorf("accepted role %q", m.Role)
		}
	})
}

func FuzzParseQMPReply(f *testing.F) {
	f.Add(`{"return":{},"id":"libvirt-1"}`)
	f.Add(`{"error":{"class":"GenericError","desc":"x"}}`)
	f.Add(`{"return":null}`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, s string) {
		ret, err := parseQMPReply([]byte(s))
		if err == nil && ret == nil {
			t.Errorf("accepted %q without a return value", s)
		}
	})
}

func FuzzParseAgentChannel(f *testing.F) {
	f.Add(`<domain><devices><channel><target name="org.qemu.guest_agent.0" state="connected"/></channel></devices></domain>`)
	f.Add(`<domain><devices><channel><target name="org.qemu.guest_agent.0" state="bogus"/></channel></devices></domain>`)
	f.Add(`<domain>`)
	f.Fuzz(func(t *testing.T, s string) {
		st, _ := parseAgentChannel(s)
		switch st {
		case agentUnknown, agentConnected, agentDisconnected:
		default:
			t.Errorf("state out of range for %q", s)
		}
	})
}

func FuzzParseDomainCaps(f *testing.F) {
	f.Add(`<domainCapabilities><path>/usr/bin/qemu-system-x86_64</path><domain>qemu</domain><machine>pc-q35-7.2</machine><arch>x86_64</arch></domainCapabilities>`)
	f.Add(`<domainCapabilities><path> </path></domainCapabilities>`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseDomainCaps(s)
		if err == nil && (c.Path == "" || c.Machine == "") {
			t.Errorf("accepted %q without an emulator or machine", s)
		}
	})
}

func FuzzParseUUID(f *testing.F) {
	f.Add("3d99048d-b2b7-43a1-b6f2-8f715ae09bfc")
	f.Add("3D99048DB2B743A1B6F28F715AE09BFC")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseUUID(s); err == nil && len(strings.ReplaceAll(s, "-", "")) != 32 {
			t.Errorf("accepted %q", s)
		}
	})
}

// The domain XML stays well-formed whatever the paths and names hold.
func FuzzDomainXMLWellFormed(f *testing.F) {
	f.Add("d-1", "/var/w/d-1/disk-0.qcow2", "/snap/minimal/memory")
	f.Add("<x>&", "/a,b/\"'<>", "]]>")
	f.Fuzz(func(t *testing.T, id, disk, mem string) {
		c := cloneConfig()
		c.Meta.ID, c.Disk, c.Memory.Path = id, disk, mem
		b, err := DomainXML(c)
		if err != nil {
			return
		}
		var v struct {
			Source struct {
				File string `xml:"file,attr"`
			} `xml:"devices>disk>source"`
		}
		if err := xml.Unmarshal(b, &v); err != nil {
			// encoding/xml cannot write characters XML forbids (control
			// bytes); such paths never reach here from a real disk.
			if !strings.ContainsFunc(id+disk+mem, func(r rune) bool { return r < 0x20 || r == 0xFFFD || r == 0xFFFE || r == 0xFFFF }) {
				t.Fatalf("invalid XML for %q %q %q: %v", id, disk, mem, err)
			}
			return
		}
		if v.Source.File != disk && !strings.ContainsFunc(disk, func(r rune) bool { return r < 0x20 || r == 0xFFFD }) {
			t.Errorf("disk %q came back as %q", disk, v.Source.File)
		}
	})
}
