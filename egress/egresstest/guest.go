// Package egresstest is a guest for egress networks without a VM: a second
// gVisor network stack at the guest's address, joined to the network by a
// unix socketpair carrying QEMU's stream framing (each Ethernet frame after
// its 4-byte big-endian length), the same frames a virtio NIC's stream
// netdev carries. Tests and the benchmark use it to drive the real egress
// stack from the guest's side.
package egresstest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"gvisor.dev/gvisor/pkg/buffer"
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
)

// The guest's addresses, as the warmdesk image configures them.
var (
	Addr    = netip.MustParseAddr("10.0.2.15")
	Gateway = netip.MustParseAddr("10.0.2.2")
)

// Pair returns the two ends of a unix stream socketpair: one for the egress
// network (its Attach), one for the guest.
func Pair() (network, guest net.Conn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fa, fb := os.NewFile(uintptr(fds[0]), "network"), os.NewFile(uintptr(fds[1]), "guest")
	defer fa.Close()
	defer fb.Close()
	if network, err = net.FileConn(fa); err != nil {
		return nil, nil, err
	}
	if guest, err = net.FileConn(fb); err != nil {
		network.Close()
		return nil, nil, err
	}
	return network, guest, nil
}

// Guest is a network stack at Addr/24 whose default route is Gateway.
type Guest struct {
	S      *stack.Stack
	ep     *channel.Endpoint
	conn   net.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ports  atomic.Uint32
}

// NewGuest starts a guest on conn (the guest end of Pair).
func NewGuest(conn net.Conn) (*Guest, error) {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	ep := channel.New(1024, 1500, tcpip.LinkAddress("\x52\x54\x00\x77\x64\x01"))
	if err := s.CreateNIC(1, ethernet.New(ep)); err != nil {
		return nil, fmt.Errorf("guest nic: %s", err)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(Addr.As4()), PrefixLen: 24}}
	if err := s.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		return nil, fmt.Errorf("guest address: %s", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, Gateway: tcpip.AddrFrom4(Gateway.As4()), NIC: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	g := &Guest{S: s, ep: ep, conn: conn, cancel: cancel}
	g.wg.Add(2)
	go func() { defer g.wg.Done(); g.send(ctx) }()
	go func() { defer g.wg.Done(); g.receive() }()
	return g, nil
}

func (g *Guest) send(ctx context.Context) {
	w := bufio.NewWriterSize(g.conn, 256<<10)
	var hdr [4]byte
	for {
		pkt := g.ep.ReadContext(ctx)
		if pkt == nil {
			return
		}
		v := pkt.ToView()
		pkt.DecRef()
		binary.BigEndian.PutUint32(hdr[:], uint32(v.Size()))
		w.Write(hdr[:])
		w.Write(v.AsSlice())
		v.Release()
		if g.ep.NumQueued() == 0 && w.Flush() != nil {
			return
		}
	}
}

func (g *Guest) receive() {
	r := bufio.NewReaderSize(g.conn, 256<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
		g.ep.InjectInbound(0, pkt)
		pkt.DecRef()
	}
}

// Dial opens a TCP connection from the guest, from a source port no
// earlier connection of this guest used (until 40000 of them): a port
// picked at random can meet its own earlier connection still closing, and
// the SYN then waits for retransmission, seconds in a latency benchmark.
func (g *Guest) Dial(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	port := uint16(20000 + g.ports.Add(1)%40000)
	local := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(Addr.As4()), Port: port}
	return gonet.DialTCPWithBind(ctx, g.S, local, tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(to.Addr().As4()), Port: to.Port()}, ipv4.ProtocolNumber)
}

// Listen accepts TCP connections on a guest port.
func (g *Guest) Listen(port uint16) (net.Listener, error) {
	return gonet.ListenTCP(g.S, tcpip.FullAddress{NIC: 1, Port: port}, ipv4.ProtocolNumber)
}

// DialUDP opens a UDP socket from the guest to an address.
func (g *Guest) DialUDP(to netip.AddrPort) (net.Conn, error) {
	return gonet.DialUDP(g.S, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(to.Addr().As4()), Port: to.Port()}, ipv4.ProtocolNumber)
}

// Close ends the guest and its link.
func (g *Guest) Close() {
	g.cancel()
	g.conn.Close()
	g.S.Close()
	g.ep.Close()
	g.wg.Wait()
}
