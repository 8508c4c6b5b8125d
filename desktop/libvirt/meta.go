package libvirt

import (
	"encoding/xml"
	"fmt"
	"strings"
)

// ParseMeta reads hostd's element out of what DomainGetMetadata returns
// for MetadataURI. libvirt answers with the bare element (<machine .../>,
// no namespace: the query named it), but an element that does carry a
// namespace must carry hostd's.
func ParseMeta(data string) (Meta, error) {
	var m struct {
		XMLName xml.Name
		Meta
	}
	if err := xml.Unmarshal([]byte(data), &m); err != nil {
		return Meta{}, fmt.Errorf("domain metadata: %w", err)
	}
	if m.XMLName.Local != "machine" || (m.XMLName.Space != "" && m.XMLName.Space != MetadataURI) {
		return Meta{}, fmt.Errorf("domain metadata: element <%s> in namespace %q is not hostd's", m.XMLName.Local, m.XMLName.Space)
	}
	switch m.Role {
	case RoleDesktop, RoleBake, RoleTemplate:
	default:
		return Meta{}, fmt.Errorf("domain metadata: unknown role %q", m.Role)
	}
	if m.ID == "" || strings.ContainsAny(m.ID, "/\x00") {
		return Meta{}, fmt.Errorf("domain metadata: bad id %q", m.ID)
	}
	return m.Meta, nil
}

// domainCaps is the part of libvirt's domain capabilities hostd reads: the
// emulator libvirt would run and the machine type an alias resolves to.
type domainCaps struct {
	Path    string `xml:"path"`
	Domain  string `xml:"domain"`
	Machine string `xml:"machine"`
	Arch    string `xml:"arch"`
}

// parseDomainCaps reads ConnectGetDomainCapabilities' answer.
func parseDomainCaps(data string) (domainCaps, error) {
	var c domainCaps
	if err := xml.Unmarshal([]byte(data), &c); err != nil {
		return c, fmt.Errorf("domain capabilities: %w", err)
	}
	c.Path, c.Machine = strings.TrimSpace(c.Path), strings.TrimSpace(c.Machine)
	if c.Path == "" || c.Machine == "" {
		return c, fmt.Errorf("domain capabilities name no emulator or machine type")
	}
	return c, nil
}
