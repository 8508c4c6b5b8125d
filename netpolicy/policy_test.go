package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Entry
	}{
		{"example.com", Entry{Kind: HostName, Name: "example.com"}},
		{"PyPI.Example.org.", Entry{Kind: HostName, Name: "pypi.example.org"}},
		{"*.example.com:443", Entry{Kind: HostName, Name: "example.com", Wildcard: true, Port: 443}},
		{"host:3000", Entry{Kind: HostService, Port: 3000}},
		{"HOST:8080", Entry{Kind: HostService, Port: 8080}},
		{"203.0.113.0/24", Entry{Kind: Network, Prefix: netip.MustParsePrefix("203.0.113.0/24")}},
		{"203.0.113.7:443", Entry{Kind: Network, Prefix: netip.MustParsePrefix("203.0.113.7/32"), Port: 443}},
		{"2001:db8::/32", Entry{Kind: Network, Prefix: netip.MustParsePrefix("2001:db8::/32")}},
		{"[2001:db8::/32]:443", Entry{Kind: Network, Prefix: netip.MustParsePrefix("2001:db8::/32"), Port: 443}},
		{"[2001:db8::1]", Entry{Kind: Network, Prefix: netip.MustParsePrefix("2001:db8::1/128")}},
	} {
		got, err := ParseEntry(c.in)
		if err != nil {
			t.Errorf("ParseEntry(%q): %v", c.in, err)
			continue
		}
		c.want.Raw = c.in
		if got != c.want {
			t.Errorf("ParseEntry(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseEntryRefuses(t *testing.T) {
	for in, says := range map[string]string{
		"":                               "empty",
		"host:":                          "port",
		"host:0":                         "port",
		"host:70000":                     "port",
		"example.com:http":               "port",
		"exa mple.com":                   "letters, digits",
		"*.com":                          "top-level domain",
		"a.*.example.com":                "wildcard",
		"-bad.example.com":               "starting or ending",
		"10.0.0.300":                     "not an IP address",
		"10.0.0.1/33":                    "CIDR",
		"10.0.0.1/8":                     "did you mean 10.0.0.0/8",
		"[2001:db8::1":                   `"]"`,
		"[2001:db8::1]x":                 "after the bracketed",
		"a..example.com":                 "empty label",
		"127.0.0.0/8":                    "guest's own loopback",
		"127.0.0.1:8009":                 "host:PORT",
		"127.1.0.0/16":                   "guest's own loopback",
		"[::1]:80":                       "guest's own loopback",
		strings.Repeat("a", 64) + ".com": "over 63",
	} {
		_, err := ParseEntry(in)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseEntry(%q) = %v, want an error saying %q", in, err, says)
		}
	}
}

func TestCompileNamesTheEntryAtFault(t *testing.T) {
	_, err := Compile(Policy{Mode: Allow, Allow: []string{"example.com", "host:x"}}, nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.Field != "allow[1]" || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"host:x"`) {
		t.Errorf("err = %v", err)
	}
	for _, p := range []Policy{
		{Mode: "closed"},
		{Mode: None, Allow: []string{"example.com"}},
		{Mode: Allow, Allow: make([]string, MaxEntries+1)},
	} {
		if _, err := Compile(p, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Compile(%+v) = %v, want invalid", p, err)
		}
	}
	if r, err := Compile(Policy{}, nil); err != nil || r.Mode != None {
		t.Errorf("the empty policy: %v %v, want mode none", r, err)
	}
}

func TestDecide(t *testing.T) {
	hostAddrs := []netip.Prefix{netip.MustParsePrefix("198.51.100.5/32")}
	allowPolicy := Policy{Mode: Allow, Allow: []string{
		"*.example.com:443", "pypi.example.org", "host:3000", "203.0.113.0/24:80", "169.254.169.254/32", "10.1.0.0/16",
	}}
	public := netip.MustParseAddr("192.0.2.10")
	for _, c := range []struct {
		name   string
		policy Policy
		d      Dest
		allow  bool
		entry  string
	}{
		{"none refuses all", Policy{}, Dest{Name: "example.com", Addr: public, Port: 443}, false, ""},
		{"none refuses host services", Policy{Mode: None}, Dest{Host: true, Addr: netip.MustParseAddr("127.0.0.1"), Port: 3000}, false, ""},
		{"wildcard matches a subdomain", allowPolicy, Dest{Name: "www.example.com", Addr: public, Port: 443}, true, "*.example.com:443"},
		{"wildcard matches deeper", allowPolicy, Dest{Name: "a.b.example.com", Addr: public, Port: 443}, true, "*.example.com:443"},
		{"wildcard is not the domain itself", allowPolicy, Dest{Name: "example.com", Addr: public, Port: 443}, false, ""},
		{"wildcard's port", allowPolicy, Dest{Name: "www.example.com", Addr: public, Port: 80}, false, ""},
		{"a look-alike", allowPolicy, Dest{Name: "wwwexample.com", Addr: public, Port: 443}, false, ""},
		{"exact name, any port", allowPolicy, Dest{Name: "PYPI.example.org.", Addr: public, Port: 8443}, true, "pypi.example.org"},
		{"a name entry never reaches loopback (rebinding)", allowPolicy, Dest{Name: "pypi.example.org", Addr: netip.MustParseAddr("127.0.0.1"), Port: 443}, false, ""},
		{"nor a private address", allowPolicy, Dest{Name: "pypi.example.org", Addr: netip.MustParseAddr("192.168.1.1"), Port: 443}, false, ""},
		{"nor the host's own address", allowPolicy, Dest{Name: "pypi.example.org", Addr: netip.MustParseAddr("198.51.100.5"), Port: 443}, false, ""},
		{"host service named", allowPolicy, Dest{Host: true, Addr: netip.MustParseAddr("127.0.0.1"), Port: 3000}, true, "host:3000"},
		{"host service not named", allowPolicy, Dest{Host: true, Addr: netip.MustParseAddr("127.0.0.1"), Port: 8787}, false, ""},
		{"CIDR with port", allowPolicy, Dest{Addr: netip.MustParseAddr("203.0.113.9"), Port: 80}, true, "203.0.113.0/24:80"},
		{"CIDR, other port", allowPolicy, Dest{Addr: netip.MustParseAddr("203.0.113.9"), Port: 22}, false, ""},
		{"a named link-local address", allowPolicy, Dest{Addr: netip.MustParseAddr("169.254.169.254"), Port: 80}, true, "169.254.169.254/32"},
		{"a named private network", allowPolicy, Dest{Addr: netip.MustParseAddr("10.1.2.3"), Port: 5432}, true, "10.1.0.0/16"},
		{"an IPv4-mapped loopback", allowPolicy, Dest{Addr: netip.MustParseAddr("::ffff:127.0.0.1"), Port: 80}, false, ""},
		{"open: a public address", Policy{Mode: Open}, Dest{Name: "anything.test", Addr: public, Port: 443}, true, ""},
		{"open: never loopback", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("127.0.0.53"), Port: 53}, false, ""},
		{"open: never link-local", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("169.254.169.254"), Port: 80}, false, ""},
		{"open: never private", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("172.16.5.4"), Port: 80}, false, ""},
		{"open: never the host", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("198.51.100.5"), Port: 22}, false, ""},
		{"open: never multicast", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("224.0.0.1"), Port: 5353}, false, ""},
		{"open: never unspecified", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("0.0.0.0"), Port: 80}, false, ""},
		{"open: never IPv6 ULA", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("fd00::1"), Port: 80}, false, ""},
		{"open: host services still by name", Policy{Mode: Open, Allow: []string{"host:3000"}}, Dest{Host: true, Addr: netip.MustParseAddr("127.0.0.1"), Port: 3000}, true, "host:3000"},
		{"open: other host ports refused", Policy{Mode: Open, Allow: []string{"host:3000"}}, Dest{Host: true, Addr: netip.MustParseAddr("127.0.0.1"), Port: 3001}, false, ""},
		{"allow: an address nobody named", allowPolicy, Dest{Addr: public, Port: 443}, false, ""},
		{"the whole internet is not the metadata service", Policy{Mode: Allow, Allow: []string{"0.0.0.0/0:80"}}, Dest{Addr: netip.MustParseAddr("169.254.169.254"), Port: 80}, false, ""},
		{"the whole internet is not the LAN", Policy{Mode: Allow, Allow: []string{"0.0.0.0/0:443"}}, Dest{Addr: netip.MustParseAddr("10.0.0.5"), Port: 443}, false, ""},
		{"the whole internet is public addresses", Policy{Mode: Allow, Allow: []string{"0.0.0.0/0:443"}}, Dest{Addr: public, Port: 443}, true, "0.0.0.0/0:443"},
		{"a network around the host is not the host", Policy{Mode: Allow, Allow: []string{"198.51.100.0/24"}}, Dest{Addr: netip.MustParseAddr("198.51.100.5"), Port: 22}, false, ""},
		{"the host's own address named exactly", Policy{Mode: Allow, Allow: []string{"198.51.100.5/32:22"}}, Dest{Addr: netip.MustParseAddr("198.51.100.5"), Port: 22}, true, "198.51.100.5/32:22"},
		{"a private network named whole", Policy{Mode: Allow, Allow: []string{"10.0.0.0/8"}}, Dest{Addr: netip.MustParseAddr("10.9.8.7"), Port: 5432}, true, "10.0.0.0/8"},
		{"open: never benchmarking addresses (fake-IP DNS)", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("198.18.0.1"), Port: 443}, false, ""},
		{"open: never broadcast", Policy{Mode: Open}, Dest{Addr: netip.MustParseAddr("255.255.255.255"), Port: 9}, false, ""},
	} {
		r, err := Compile(c.policy, hostAddrs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v := r.Decide(c.d)
		if v.Allowed != c.allow || v.Entry != c.entry || v.Reason == "" {
			t.Errorf("%s: %+v, want allowed %v by %q", c.name, v, c.allow, c.entry)
		}
	}
}

func TestAllowsName(t *testing.T) {
	r, _ := Compile(Policy{Mode: Allow, Allow: []string{"*.example.com:443", "pypi.example.org", "host:3000"}}, nil)
	for name, want := range map[string]bool{"a.example.com": true, "pypi.example.org": true, "example.com": false, "other.test": false} {
		if got := r.AllowsName(name); got != want {
			t.Errorf("AllowsName(%q) = %v, want %v", name, got, want)
		}
	}
	open, _ := Compile(Policy{Mode: Open}, nil)
	none, _ := Compile(Policy{}, nil)
	if !open.AllowsName("anything.test") || none.AllowsName("example.com") {
		t.Error("open answers every name, none no name")
	}
}

func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "host:3000", "10.0.0.0/8:22", "[::1]:80", "2001:db8::/32", "x:y:z", "[", "*.", "host:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		switch e.Kind {
		case HostService:
			if e.Port == 0 {
				t.Fatalf("%q: a host service without a port", s)
			}
		case Network:
			if !e.Prefix.IsValid() || e.Prefix != e.Prefix.Masked() {
				t.Fatalf("%q: prefix %v", s, e.Prefix)
			}
		case HostName:
			if checkName(e.Name) != nil {
				t.Fatalf("%q: accepted name %q", s, e.Name)
			}
		default:
			t.Fatalf("%q: kind %d", s, e.Kind)
		}
		// Parsing what was accepted gives the same entry.
		again, err := ParseEntry(e.Raw)
		if err != nil || again != e {
			t.Fatalf("%q: reparsed as %+v, %v", s, again, err)
		}
	})
}
