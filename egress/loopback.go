package egress

import (
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/warmdesk/warmdesk/netpolicy"
)

// LoopbackReason is why a guest's connection to 127.0.0.0/8 that left
// its NIC is refused.
const LoopbackReason = "127.0.0.0/8 is the guest's own loopback: a connection to it that leaves the guest's network interface is never carried (a service on the host's loopback is host:PORT)"

// refuseLoopback takes the frames of a guest's TCP connection attempts to
// 127.0.0.0/8, which only a guest whose root rerouted its loopback sends
// out of its NIC. The network stack drops such packets unseen (a loopback
// address on a real interface is martian), so without this they made no
// event and the guest's connect hung until its own timeout. Each SYN is
// reported as a refused flow and answered with an ICMP "communication
// administratively prohibited" from the gateway, which ends the guest's
// connect at once. It says whether it took the frame.
func (n *Network) refuseLoopback(frame []byte) bool {
	p, ok := parseLoopback(frame)
	if !ok {
		return false
	}
	if p.isSYN {
		n.report(Flow{Dest: netpolicy.Dest{Addr: p.dst, Port: p.port}, Reason: LoopbackReason, Start: time.Now()})
		if reply := prohibited(frame); reply != nil {
			n.link.write(reply, true)
		}
	}
	return true
}

// loopbackPacket is an IPv4 packet from the guest to 127.0.0.0/8.
type loopbackPacket struct {
	dst   netip.Addr
	port  uint16
	isSYN bool // a TCP SYN (without ACK): a new connection
}

// parseLoopback reads an Ethernet frame; ok says it is an IPv4 packet to
// 127.0.0.0/8 (which the stack would drop).
func parseLoopback(frame []byte) (loopbackPacket, bool) {
	if len(frame) < header.EthernetMinimumSize || header.Ethernet(frame).Type() != header.IPv4ProtocolNumber {
		return loopbackPacket{}, false
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if len(ip) < header.IPv4MinimumSize || !ip.IsValid(len(ip)) {
		return loopbackPacket{}, false
	}
	dst := netip.AddrFrom4(ip.DestinationAddress().As4())
	if !dst.IsLoopback() {
		return loopbackPacket{}, false
	}
	p := loopbackPacket{dst: dst}
	if ip.Protocol() != uint8(header.TCPProtocolNumber) || ip.FragmentOffset() != 0 {
		return p, true
	}
	tcp := header.TCP(ip.Payload())
	if len(tcp) < header.TCPMinimumSize {
		return p, true
	}
	p.port = tcp.DestinationPort()
	p.isSYN = tcp.Flags()&(header.TCPFlagSyn|header.TCPFlagAck) == header.TCPFlagSyn
	return p, true
}

// prohibited is the gateway's ICMP destination unreachable (code 13,
// communication administratively prohibited) for an IPv4 frame from the
// guest: RFC 792's answer, quoting the packet's header and its first 8
// bytes. Linux ends a connect with EHOSTUNREACH on it.
func prohibited(frame []byte) []byte {
	eth := header.Ethernet(frame)
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	quoted := min(int(ip.HeaderLength())+8, len(ip))
	size := header.EthernetMinimumSize + header.IPv4MinimumSize + header.ICMPv4MinimumSize + quoted
	out := make([]byte, size)
	header.Ethernet(out).Encode(&header.EthernetFields{SrcAddr: gatewayMAC, DstAddr: eth.SourceAddress(), Type: header.IPv4ProtocolNumber})
	reply := header.IPv4(out[header.EthernetMinimumSize:])
	reply.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(reply)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(GatewayAddr.As4()), DstAddr: ip.SourceAddress(),
	})
	reply.SetChecksum(^reply.CalculateChecksum())
	icmp := header.ICMPv4(reply[header.IPv4MinimumSize:])
	icmp.SetType(header.ICMPv4DstUnreachable)
	icmp.SetCode(header.ICMPv4AdminProhibited)
	copy(icmp[header.ICMPv4MinimumSize:], ip[:quoted])
	icmp.SetChecksum(^checksum.Checksum(icmp, 0))
	return out
}
