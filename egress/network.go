// Package egress is a desktop's network, run by hostd outside the guest.
//
// QEMU's NIC backend is a stream socket (-netdev stream) that carries the
// guest's Ethernet frames to hostd, where a user-space TCP/IP stack (gVisor's
// netstack) plays the guest's whole network: the gateway, a DNS server, and
// every address the guest connects to. Each TCP connection the guest opens
// is decided by the desktop's policy (package netpolicy) before hostd dials
// anything; an allowed one is carried by hostd's own socket, a refused one
// never leaves this process. Nothing the guest does inside (root, routes,
// proxy settings, its own DNS) gets around it: the stream is the guest's
// only way out.
//
// The addresses are QEMU's user-mode ones, which the guest image is
// configured for: the guest is 10.0.2.15/24, the gateway 10.0.2.2 (also
// "host": its ports lead to the host's loopback when a host:PORT entry
// allows them) and the DNS server 10.0.2.3. Carried: TCP, and DNS over UDP
// to 10.0.2.3. Not carried: other UDP (QUIC falls back to TCP), ICMP.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/warmdesk/warmdesk/netpolicy"
)

// The guest network's addresses (QEMU's user-mode defaults).
var (
	GuestAddr   = netip.MustParseAddr("10.0.2.15")
	GatewayAddr = netip.MustParseAddr("10.0.2.2")
	DNSAddr     = netip.MustParseAddr("10.0.2.3")
)

// HostAlias is the name the guest's DNS answers with the gateway's address.
const HostAlias = "host"

// gatewayMAC is the MAC QEMU's user-mode network gives its gateway.
const gatewayMAC = tcpip.LinkAddress("\x52\x55\x0a\x00\x02\x02")

const (
	nicID = 1
	mtu   = 1500
	// DefaultMaxFlows bounds a desktop's open connections.
	DefaultMaxFlows = 256
	// DefaultDialTimeout bounds hostd's dial for one guest connection.
	DefaultDialTimeout = 10 * time.Second
	// tcpBufferMax bounds each direction's buffer of one connection.
	tcpBufferMax = 256 << 10
	// guestDialTimeout bounds a dial into the guest (the port proxy).
	guestDialTimeout = 10 * time.Second
)

// Flow is one connection attempt by the guest, reported when it ends.
type Flow struct {
	Dest     netpolicy.Dest
	Allowed  bool
	Entry    string // the entry that allowed it
	Reason   string // why it was refused, or why an allowed one failed
	Sent     int64  // bytes from the guest
	Received int64  // bytes to the guest
	Start    time.Time
	Duration time.Duration
}

// Config is what one desktop's network needs.
type Config struct {
	// Rules returns the desktop's policy as it is now; it is asked per
	// connection and per DNS query, so a change applies at once.
	Rules func() (*netpolicy.Rules, error)
	// Dial opens hostd's side of an allowed connection.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Resolve answers the guest's DNS queries for allowed names (IPv4).
	Resolve func(ctx context.Context, name string) ([]netip.Addr, error)
	// HostAddr is where the gateway's ports lead (the host's loopback).
	HostAddr    netip.Addr
	MaxFlows    int
	DialTimeout time.Duration
	// OnFlow hears every connection attempt when it ends; it must not block.
	OnFlow func(Flow)
	Logger *slog.Logger
}

// Network is one desktop's network stack. Its link (the QEMU stream) can
// be replaced: a machine restarted under the same desktop reattaches.
type Network struct {
	cfg    Config
	stack  *stack.Stack
	nic    *channel.Endpoint
	ctx    context.Context
	cancel context.CancelFunc
	flows  chan struct{} // a token per open connection
	names  *nameMemo
	link   linkSlot
	// sniffing counts refused connections held open to answer them.
	sniffing atomic.Int64
	done     sync.WaitGroup
}

// New starts a desktop's network with no link attached.
func New(cfg Config) (*Network, error) {
	if cfg.Rules == nil || cfg.Dial == nil || cfg.Resolve == nil {
		return nil, errors.New("egress: Rules, Dial and Resolve are required")
	}
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = DefaultMaxFlows
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if !cfg.HostAddr.IsValid() {
		cfg.HostAddr = netip.MustParseAddr("127.0.0.1")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnFlow == nil {
		cfg.OnFlow = func(Flow) {}
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	// Per-connection buffers bounded well below gVisor's defaults (1 MB,
	// receive growing to 4 MB): a guest may hold DefaultMaxFlows
	// connections with full buffers, and that must stay small beside the
	// guest's RAM.
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 128 << 10, Max: tcpBufferMax}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 128 << 10, Max: tcpBufferMax}
	for _, opt := range []tcpip.SettableTransportProtocolOption{&rcv, &snd} {
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			s.Close()
			return nil, fmt.Errorf("egress: tcp option %T: %s", opt, err)
		}
	}
	nic := channel.New(1024, mtu, gatewayMAC)
	if err := s.CreateNIC(nicID, ethernet.New(nic)); err != nil {
		s.Close()
		return nil, fmt.Errorf("egress: nic: %s", err)
	}
	// Promiscuous and spoofing: the stack accepts a connection to any
	// address and answers as that address, so it can stand in for every
	// destination the guest dials.
	s.SetPromiscuousMode(nicID, true)
	s.SetSpoofing(nicID, true)
	for _, a := range []netip.Addr{GatewayAddr, DNSAddr} {
		pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(a.As4()), PrefixLen: 24}}
		if err := s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			s.Close()
			return nil, fmt.Errorf("egress: address %s: %s", a, err)
		}
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}})
	ctx, cancel := context.WithCancel(context.Background())
	n := &Network{
		cfg: cfg, stack: s, nic: nic, ctx: ctx, cancel: cancel,
		flows: make(chan struct{}, cfg.MaxFlows), names: newNameMemo(4096),
	}
	fwd := tcp.NewForwarder(s, 0, cfg.MaxFlows, n.forward)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	dns, err := gonet.DialUDP(s, ptr(fullAddr(DNSAddr, 53)), nil, ipv4.ProtocolNumber)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("egress: dns: %w", err)
	}
	n.done.Add(2)
	go func() { defer n.done.Done(); n.serveDNS(dns) }()
	go func() { defer n.done.Done(); n.sendFrames() }()
	return n, nil
}

// Close ends the network: its link, every connection, its goroutines.
func (n *Network) Close() error {
	n.cancel()
	n.link.set(nil)
	n.stack.Close()
	n.nic.Close()
	n.done.Wait()
	return nil
}

// DialGuest opens a TCP connection from the gateway to a port in the guest
// (for hostd's port proxy). Policy does not apply: this is the host
// reaching in, not the guest out.
func (n *Network) DialGuest(ctx context.Context, port uint16) (net.Conn, error) {
	// Without a link, the SYN would be retried for minutes.
	ctx, cancel := context.WithTimeout(ctx, guestDialTimeout)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, n.stack, fullAddr(GuestAddr, port), ipv4.ProtocolNumber)
	if err != nil {
		// gonet gives the stack's errors as text; a reset from the guest's
		// kernel (nothing listens there) becomes the usual ECONNREFUSED.
		var op *net.OpError
		if errors.As(err, &op) && op.Err.Error() == refusedText {
			op.Err = syscall.ECONNREFUSED
		}
		return nil, fmt.Errorf("guest port %d: %w", port, err)
	}
	return c, nil
}

var refusedText = (&tcpip.ErrConnectionRefused{}).String()

// rules is the policy now; a broken one refuses everything.
func (n *Network) rules() *netpolicy.Rules {
	r, err := n.cfg.Rules()
	if err != nil {
		n.cfg.Logger.Warn("egress: policy unreadable, refusing", "err", err)
		r, _ = netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.None}, nil)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// Describe is a flow in one line, for events and the viewer's strip.
func Describe(f Flow) string {
	if !f.Allowed {
		return fmt.Sprintf("refused %s: %s", f.Dest, f.Reason)
	}
	by := f.Entry
	if by == "" {
		by = "open mode"
	}
	s := fmt.Sprintf("%s allowed by %s: %d B out, %d B in, %s", f.Dest, by, f.Sent, f.Received, f.Duration.Round(time.Millisecond))
	if f.Reason != "" && f.Sent == 0 && f.Received == 0 {
		s = fmt.Sprintf("%s allowed by %s, failed: %s", f.Dest, by, f.Reason)
	}
	return s
}
