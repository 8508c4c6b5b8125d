package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/netpolicy"
)

// SetConfig is what every desktop's network shares.
type SetConfig struct {
	// Policy returns a desktop's policy as recorded now.
	Policy func(id string) (netpolicy.Policy, error)
	// Dial and Resolve reach the outside for allowed connections; nil uses
	// the host's own (net.Dialer, the system resolver).
	Dial    func(ctx context.Context, network, address string) (net.Conn, error)
	Resolve func(ctx context.Context, name string) ([]netip.Addr, error)
	// HostAddrs are the host's own addresses, refused like loopback;
	// nil reads the host's interfaces.
	HostAddrs   []netip.Prefix
	MaxFlows    int
	DialTimeout time.Duration
	// OnFlow hears every connection attempt of every desktop (for
	// counters); it must not block.
	OnFlow func(id string, f Flow)
	// OnEvent hears a line per connection for people (events, the
	// viewer), at most EventsPerSecond per desktop: a guest opening
	// thousands of connections must not flood every subscriber. Those over
	// the rate are summed up in the next line after the second ends.
	OnEvent         func(id, summary string)
	EventsPerSecond int
	Logger          *slog.Logger
}

// Set is the networks of every live desktop: a desktop.Observer that gives
// each machine that comes up its network and takes it away when it goes.
type Set struct {
	cfg       SetConfig
	hostAddrs []netip.Prefix
	mu        sync.Mutex
	nets      map[string]*desktopNet
}

type desktopNet struct {
	*Network
	mu    sync.Mutex
	key   string
	rules *netpolicy.Rules
	lines lineGate
}

// DefaultEventsPerSecond bounds a desktop's connection lines.
const DefaultEventsPerSecond = 20

// lineGate passes at most max lines a second and counts the rest.
type lineGate struct {
	mu                  sync.Mutex
	window              time.Time
	passed              int
	dropped, droppedNot int // lines held back, and how many were refusals
}

// admit says whether a line may go now, and returns a summary of the lines
// held back in the last window when one ended.
func (g *lineGate) admit(now time.Time, max int, refused bool) (ok bool, held string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.window) >= time.Second {
		if g.dropped > 0 {
			held = fmt.Sprintf("%d more connections (%d refused) in the second before, not shown one by one", g.dropped, g.droppedNot)
		}
		g.window, g.passed, g.dropped, g.droppedNot = now, 0, 0, 0
	}
	if g.passed < max {
		g.passed++
		return true, held
	}
	g.dropped++
	if refused {
		g.droppedNot++
	}
	return false, held
}

// NewSet makes the set; it has no networks until machines come up.
func NewSet(cfg SetConfig) *Set {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.EventsPerSecond <= 0 {
		cfg.EventsPerSecond = DefaultEventsPerSecond
	}
	if cfg.Dial == nil {
		cfg.Dial = dialOut(&net.Dialer{})
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, name string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip4", name)
		}
	}
	s := &Set{cfg: cfg, hostAddrs: cfg.HostAddrs, nets: map[string]*desktopNet{}}
	if s.hostAddrs == nil {
		s.hostAddrs = interfacePrefixes()
	}
	return s
}

// dialOut dials for the guest and refuses a connection that ended on this
// host although it was not to the loopback (which only host:PORT entries
// reach): an address the host gained after the policy was compiled is
// refused all the same.
func dialOut(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if ap, perr := netip.ParseAddrPort(address); perr == nil && !ap.Addr().IsLoopback() && loopsBack(c) {
			c.Close()
			return nil, fmt.Errorf("%s is this host: only host:PORT entries reach it", address)
		}
		return c, nil
	}
}

// loopsBack says whether a connection ended on this host: its two ends
// have the same address.
func loopsBack(c net.Conn) bool {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	return lok && rok && l.IP.Equal(r.IP)
}

// interfacePrefixes are the host's own addresses, as single-address
// prefixes.
func interfacePrefixes() []netip.Prefix {
	addrs, _ := net.InterfaceAddrs()
	var out []netip.Prefix
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				ip = ip.Unmap()
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return out
}

// MachineUp attaches the machine's NIC to the desktop's network, making the
// network on first use.
func (s *Set) MachineUp(id string, m desktop.Machine) {
	// A unix connect to a listening socket completes in the kernel, even
	// with QEMU busy; the bound only keeps a broken machine from holding up
	// the create that called this.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := m.DialNIC(ctx)
	if err != nil {
		s.cfg.Logger.Warn("egress: the machine's NIC did not answer; the desktop has no network", "desktop", id, "err", err)
		return
	}
	n, err := s.network(id)
	if err != nil {
		conn.Close()
		s.cfg.Logger.Error("egress: network", "desktop", id, "err", err)
		return
	}
	n.Attach(conn)
}

// MachineDown detaches the link; the network stays for the next machine.
func (s *Set) MachineDown(id string) {
	s.mu.Lock()
	n := s.nets[id]
	s.mu.Unlock()
	if n != nil {
		n.link.set(nil)
	}
}

// Forget ends a deleted desktop's network and its connections.
func (s *Set) Forget(id string) {
	s.mu.Lock()
	n := s.nets[id]
	delete(s.nets, id)
	s.mu.Unlock()
	if n != nil {
		n.Close()
	}
}

// Close ends every network.
func (s *Set) Close() {
	s.mu.Lock()
	nets := s.nets
	s.nets = map[string]*desktopNet{}
	s.mu.Unlock()
	for _, n := range nets {
		n.Close()
	}
}

// ErrNoNetwork: the desktop has no live network (not running here).
var ErrNoNetwork = errors.New("the desktop has no live network: it is not running")

// DialGuest connects to a port inside a desktop's guest.
func (s *Set) DialGuest(ctx context.Context, id string, port uint16) (net.Conn, error) {
	s.mu.Lock()
	n := s.nets[id]
	s.mu.Unlock()
	if n == nil {
		return nil, fmt.Errorf("%w: %w", desktop.ErrUnavailable, ErrNoNetwork)
	}
	return n.DialGuest(ctx, port)
}

func (s *Set) network(id string) (*desktopNet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nets[id]; n != nil {
		return n, nil
	}
	dn := &desktopNet{}
	n, err := New(Config{
		Rules:    func() (*netpolicy.Rules, error) { return s.rules(id, dn) },
		Dial:     s.cfg.Dial,
		Resolve:  s.cfg.Resolve,
		MaxFlows: s.cfg.MaxFlows, DialTimeout: s.cfg.DialTimeout,
		OnFlow: func(f Flow) {
			if s.cfg.OnFlow != nil {
				s.cfg.OnFlow(id, f)
			}
			if s.cfg.OnEvent == nil {
				return
			}
			ok, held := dn.lines.admit(time.Now(), s.cfg.EventsPerSecond, !f.Allowed)
			if held != "" {
				s.cfg.OnEvent(id, held)
			}
			if ok {
				s.cfg.OnEvent(id, Describe(f))
			}
		},
		Logger: s.cfg.Logger.With("desktop", id),
	})
	if err != nil {
		return nil, err
	}
	dn.Network = n
	s.nets[id] = dn
	return dn, nil
}

// rules compiles the desktop's recorded policy, again only when it changed.
func (s *Set) rules(id string, dn *desktopNet) (*netpolicy.Rules, error) {
	p, err := s.cfg.Policy(id)
	if err != nil {
		return nil, err
	}
	key := string(p.Normalized().Mode) + "\x00" + strings.Join(p.Allow, "\x00")
	dn.mu.Lock()
	defer dn.mu.Unlock()
	if dn.rules != nil && dn.key == key {
		return dn.rules, nil
	}
	r, err := netpolicy.Compile(p, slices.Clone(s.hostAddrs))
	if err != nil {
		return nil, err
	}
	dn.key, dn.rules = key, r
	return r, nil
}
