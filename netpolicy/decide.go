package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
)

// Rules is a checked policy, ready to decide connections. Safe for
// concurrent use; a policy change makes new Rules.
type Rules struct {
	Mode    Mode
	Entries []Entry
	// hostAddrs are the host's own addresses, which lead back to its
	// services as loopback does.
	hostAddrs []netip.Prefix
}

// Compile checks a policy; the error (an *Error) names the field at fault.
// hostAddrs are the host's own interface addresses, refused like loopback.
func Compile(p Policy, hostAddrs []netip.Prefix) (*Rules, error) {
	mode := p.Mode
	if mode == "" {
		mode = None
	}
	switch mode {
	case None, Allow, Open:
	default:
		return nil, &Error{"mode", fmt.Sprintf("%q: use none, allow or open", p.Mode)}
	}
	if len(p.Allow) > MaxEntries {
		return nil, &Error{"allow", fmt.Sprintf("%d entries: at most %d", len(p.Allow), MaxEntries)}
	}
	if mode == None && len(p.Allow) > 0 {
		return nil, &Error{"allow", "mode none allows nothing: give entries with mode allow"}
	}
	r := &Rules{Mode: mode, hostAddrs: hostAddrs}
	for i, raw := range p.Allow {
		e, err := ParseEntry(raw)
		if err != nil {
			return nil, &Error{fmt.Sprintf("allow[%d]", i), fmt.Sprintf("%q: %v", raw, err)}
		}
		r.Entries = append(r.Entries, e)
	}
	return r, nil
}

// Normalized is the policy in its stored form: the mode spelled out.
func (p Policy) Normalized() Policy {
	if p.Mode == "" {
		p.Mode = None
	}
	return p
}

// Dest is where a guest connection goes.
type Dest struct {
	// Name is the host name the guest asked for (its DNS query, HTTP Host
	// or TLS server name); empty when it used an address.
	Name string
	// Addr is the address the connection would be made to; for a
	// connection to the host, the loopback address.
	Addr netip.Addr
	Port uint16
	// Host says the guest connected to the host's alias (the gateway),
	// meaning a service on the host's loopback.
	Host bool
}

func (d Dest) String() string {
	switch {
	case d.Host:
		return fmt.Sprintf("host:%d", d.Port)
	case d.Name != "":
		return fmt.Sprintf("%s:%d (%s)", d.Name, d.Port, d.Addr)
	}
	return netip.AddrPortFrom(d.Addr, d.Port).String()
}

// Verdict is a decision about one connection.
type Verdict struct {
	Allowed bool
	// Entry is the entry that allowed it ("" for open mode's public
	// addresses and for denials).
	Entry string
	// Reason says why, for people: which entry, or what is refused.
	Reason string
}

// Decide decides one connection.
func (r *Rules) Decide(d Dest) Verdict {
	if r == nil || r.Mode == None {
		return deny("this desktop's network is off (mode none)")
	}
	if d.Host {
		for _, e := range r.Entries {
			if e.Kind == HostService && e.Port == d.Port {
				return allow(e)
			}
		}
		return deny(fmt.Sprintf("port %d of the host is not allowed: only host services named as host:PORT are", d.Port))
	}
	addr := d.Addr.Unmap()
	if why, block := r.special(addr); why != "" {
		// Only a network entry naming the address within its own block lets
		// it through: 0.0.0.0/0:443 means "anywhere public", not the
		// metadata service or the LAN, and a LAN entry does not open the
		// host's own address on it.
		for _, e := range r.Entries {
			if e.Kind == Network && e.Prefix.Contains(addr) && portOK(e, d.Port) && within(e.Prefix, block) {
				return allow(e)
			}
		}
		return deny(fmt.Sprintf("%s is %s: only an entry naming it within %s allows it", addr, why, block))
	}
	for _, e := range r.Entries {
		if e.matches(d.Name, addr, d.Port) {
			return allow(e)
		}
	}
	if r.Mode == Open {
		return Verdict{Allowed: true, Reason: "open to public addresses"}
	}
	what := d.Name
	if what == "" {
		what = addr.String()
	}
	return deny(fmt.Sprintf("%s is not allowed", what))
}

func allow(e Entry) Verdict {
	return Verdict{Allowed: true, Entry: e.Raw, Reason: "allowed by " + e.Raw}
}

func deny(why string) Verdict { return Verdict{Reason: why} }

func portOK(e Entry, port uint16) bool { return e.Port == 0 || e.Port == port }

func (e Entry) matches(name string, addr netip.Addr, port uint16) bool {
	if !portOK(e, port) {
		return false
	}
	switch e.Kind {
	case Network:
		return e.Prefix.Contains(addr)
	case HostName:
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if name == "" {
			return false
		}
		if e.Wildcard {
			return strings.HasSuffix(name, "."+e.Name)
		}
		return name == e.Name
	}
	return false
}

// AllowsName says whether some entry could allow connections to a host
// name, so its DNS query may be answered: a name entry matching it, or
// open mode.
func (r *Rules) AllowsName(name string) bool {
	if r == nil || r.Mode == None {
		return false
	}
	if r.Mode == Open {
		return true
	}
	for _, e := range r.Entries {
		if e.Kind == HostName && e.matches(name, netip.Addr{}, e.Port) {
			return true
		}
	}
	return false
}

// The address ranges that lead back into the host or its network.
var (
	loopback      = mustPrefixes("127.0.0.0/8", "::1/128")
	multicast     = mustPrefixes("224.0.0.0/4", "ff00::/8")
	thisNetwork   = mustPrefixes("0.0.0.0/8", "::/128")
	linkLocal     = mustPrefixes("169.254.0.0/16", "fe80::/10")
	privateRanges = mustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
	// reserved are IANA special-purpose blocks that are not the public
	// internet: IETF protocol assignments, benchmarking (used by fake-IP
	// DNS proxies), reserved, broadcast, and a cloud's host service.
	reserved = mustPrefixes("192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4", "168.63.129.16/32")
)

// special says why an address is refused unless named, and the block it
// is in, or "" for a public address.
func (r *Rules) special(a netip.Addr) (string, netip.Prefix) {
	if !a.IsValid() {
		return "no address", netip.Prefix{}
	}
	for _, c := range []struct {
		why    string
		blocks []netip.Prefix
	}{
		{"the host's loopback", loopback},
		{"a multicast address", multicast},
		{`"this network"`, thisNetwork},
		{"link-local", linkLocal},
		{"one of the host's own addresses", r.hostAddrs},
		{"a private address", privateRanges},
		{"a reserved address", reserved},
	} {
		if p, ok := blockOf(c.blocks, a); ok {
			return c.why, p
		}
	}
	return "", netip.Prefix{}
}

// blockOf is the first of ps that contains a.
func blockOf(ps []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, p := range ps {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// within says whether prefix e lies inside block.
func within(e, block netip.Prefix) bool {
	return block.IsValid() && e.Bits() >= block.Bits() && block.Contains(e.Addr())
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
