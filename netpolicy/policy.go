// Package netpolicy is a desktop's egress policy: what the guest may
// connect to. It parses and checks policies and decides, per connection,
// whether it is allowed and by which entry. It knows nothing of how
// connections are carried (that is the egress network's), and imports only
// the standard library.
//
// Three modes: none (the default: nothing), allow (only what an entry
// names) and open (anywhere public). In every mode the host's own services
// and the addresses that lead back into the host or its network (loopback,
// link-local, the host's own addresses, private ranges, multicast) are
// refused unless an entry names them: a host service entry ("host:3000",
// the host's loopback port 3000, which the guest reaches at the gateway
// address) or a CIDR entry that contains the address. A host name entry
// never lets a connection through to such an address, so a name that
// resolves to 127.0.0.1 (DNS rebinding) is refused too.
package netpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Mode is what a desktop may reach.
type Mode string

// The modes.
const (
	None  Mode = "none"
	Allow Mode = "allow"
	Open  Mode = "open"
)

// MaxEntries bounds a policy's entries.
const MaxEntries = 256

// Policy is a desktop's egress policy as it is stored and sent.
type Policy struct {
	Mode Mode `json:"mode"`
	// Allow lists the entries, as written: host names ("*.example.com:443",
	// "pypi.example.org"), CIDRs or addresses ("203.0.113.0/24:443",
	// "[2001:db8::/32]:443") and host services ("host:3000").
	Allow []string `json:"allow,omitempty"`
}

// UnmarshalJSON reads a policy object, strictly, or the boolean older
// clients and records send: true is open, false none.
func (p *Policy) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*p = Policy{Mode: Open}
		return nil
	case "false", "null":
		*p = Policy{Mode: None}
		return nil
	}
	type plain Policy
	var q plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return &Error{"network", fmt.Sprintf("%v: give {\"mode\": \"none\"|\"allow\"|\"open\", \"allow\": [entries]}", err)}
	}
	*p = Policy(q)
	return nil
}

// ErrInvalid classifies every error about a malformed policy.
var ErrInvalid = errors.New("invalid network policy")

// Error is a malformed policy: the field at fault ("mode", "allow[2]") and
// what is wrong with it.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// FieldName is the field at fault.
func (e *Error) FieldName() string { return e.Field }

// Is makes every Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// EntryKind says what an entry names.
type EntryKind int

// The kinds of entry.
const (
	// HostName matches the name the guest asked for.
	HostName EntryKind = iota + 1
	// Network matches the address a connection goes to.
	Network
	// HostService matches a port of the host's loopback.
	HostService
)

// Entry is one parsed allow entry.
type Entry struct {
	Raw  string
	Kind EntryKind
	// Name is the host name, lowercase, without a leading "*."; Wildcard
	// says the entry was "*.Name" and matches Name's subdomains only.
	Name     string
	Wildcard bool
	// Prefix is a Network entry's addresses.
	Prefix netip.Prefix
	// Port is the entry's port; 0 matches any (a HostService entry always
	// has one).
	Port uint16
}

// ParseEntry parses one allow entry; the error says what is wrong.
func ParseEntry(s string) (Entry, error) {
	e := Entry{Raw: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return e, errors.New("empty entry")
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "host:"); ok {
		port, err := parsePort(rest, true)
		if err != nil {
			return e, fmt.Errorf("a host service is host:PORT, the port of a service on the host's loopback: %w", err)
		}
		e.Kind, e.Port = HostService, port
		return e, nil
	}
	host, port, err := splitPort(s)
	if err != nil {
		return e, err
	}
	e.Port = port
	if p, ok, err := parseNetwork(host); ok {
		if err != nil {
			return e, err
		}
		if b, ok := blockOf(loopback, p.Addr()); ok && within(p, b) {
			return e, fmt.Errorf("%s is the guest's own loopback: connections to it stay in the guest (and one sent out of its network interface is refused), so the entry would match nothing; a service on the host's loopback is host:PORT", b)
		}
		e.Kind, e.Prefix = Network, p
		return e, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.Wildcard, name = true, rest
	}
	if err := checkName(name); err != nil {
		return e, err
	}
	if e.Wildcard && !strings.Contains(name, ".") {
		return e, fmt.Errorf("*.%s would match a whole top-level domain: name a domain under it", name)
	}
	e.Kind, e.Name = HostName, name
	return e, nil
}

// splitPort splits "host:port", "[v6]:port" or a bare host (port 0).
func splitPort(s string) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, errors.New(`an IPv6 address or prefix in brackets needs its "]"`)
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("unexpected %q after the bracketed address", rest)
		}
		port, err := parsePort(p, true)
		return host, port, err
	}
	if strings.Count(s, ":") > 1 { // a bare IPv6 address or prefix
		return s, 0, nil
	}
	host, p, found := strings.Cut(s, ":")
	if !found {
		return s, 0, nil
	}
	port, err := parsePort(p, true)
	return host, port, err
}

func parsePort(s string, required bool) (uint16, error) {
	if s == "" && !required {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: use 1 to 65535", s)
	}
	return uint16(n), nil
}

// parseNetwork reads an address or CIDR; ok says s looked like one.
func parseNetwork(s string) (netip.Prefix, bool, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, true, fmt.Errorf("CIDR %q: %v", s, strings.TrimPrefix(err.Error(), "netip.ParsePrefix("+strconv.Quote(s)+"): "))
		}
		if p != p.Masked() {
			return p, true, fmt.Errorf("CIDR %q has bits set past its /%d: did you mean %s?", s, p.Bits(), p.Masked())
		}
		return p, true, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), true, nil
	}
	if looksNumeric(s) {
		return netip.Prefix{}, true, fmt.Errorf("%q is not an IP address", s)
	}
	return netip.Prefix{}, false, nil
}

// looksNumeric tells a mistyped address ("10.0.0.300") from a name.
func looksNumeric(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return s != ""
}

// checkName checks a DNS name: labels of letters, digits and '-', not
// starting or ending with '-', at most 63 bytes, 253 in all.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("host name of %d characters: at most 253", len(name))
	}
	for _, label := range strings.Split(name, ".") {
		switch {
		case label == "":
			return fmt.Errorf("host name %q has an empty label", name)
		case len(label) > 63:
			return fmt.Errorf("host name %q has a label over 63 characters", name)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("host name %q has a label starting or ending with '-'", name)
		case strings.Contains(label, "*"):
			return fmt.Errorf("host name %q: a wildcard is allowed only as a leading \"*.\"", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("host name %q: use letters, digits, '-' and '.' only", name)
			}
		}
	}
	return nil
}
