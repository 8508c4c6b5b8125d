package egress

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/warmdesk/warmdesk/egress/egresstest"
	"github.com/warmdesk/warmdesk/netpolicy"
)

var guestMAC = tcpip.LinkAddress("\x52\x54\x00\x77\x64\x01")

// tcpFrame is an Ethernet frame of a TCP segment from the guest.
func tcpFrame(src, dst netip.Addr, dport uint16, flags header.TCPFlags) []byte {
	frame := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize)
	header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: guestMAC, DstAddr: gatewayMAC, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4())})
	ip.SetChecksum(^ip.CalculateChecksum())
	header.TCP(ip.Payload()).Encode(&header.TCPFields{SrcPort: 40000, DstPort: dport, SeqNum: 1, DataOffset: header.TCPMinimumSize, Flags: flags, WindowSize: 1000})
	return frame
}

// A guest whose root sends its loopback out of the NIC: each connection
// attempt to 127.0.0.0/8 is an event, refused, and the guest hears at once
// that it is prohibited (an ICMP that ends its connect), whatever the
// policy allows.
func TestLoopbackFromTheGuestIsRefusedAndReported(t *testing.T) {
	flows := make(chan Flow, 8)
	n, err := New(Config{
		Rules: func() (*netpolicy.Rules, error) {
			return netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.Open}, nil)
		},
		Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			t.Errorf("hostd dialled %s for the guest's loopback", addr)
			return nil, io.EOF
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, io.EOF },
		OnFlow:  func(f Flow) { flows <- f },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	hostEnd, guestEnd, err := egresstest.Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer guestEnd.Close()
	n.Attach(hostEnd)

	send := func(frame []byte) {
		t.Helper()
		if _, err := guestEnd.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
			t.Fatal(err)
		}
	}
	loop := netip.MustParseAddr("127.0.0.1")
	syn := tcpFrame(egresstest.Addr, loop, 8009, header.TCPFlagSyn)
	send(syn)
	select {
	case f := <-flows:
		if f.Allowed || f.Dest.Addr != loop || f.Dest.Port != 8009 || !strings.Contains(f.Reason, "loopback") {
			t.Errorf("flow %+v, want 127.0.0.1:8009 refused as the guest's loopback", f)
		}
		if d := Describe(f); !strings.HasPrefix(d, "refused 127.0.0.1:8009: ") {
			t.Errorf("event %q", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a SYN to 127.0.0.1 made no flow")
	}

	// The answer: ICMP destination unreachable, prohibited, from the
	// gateway to the guest, quoting the SYN.
	guestEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(guestEnd, size[:]); err != nil {
		t.Fatalf("no answer to the SYN: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(guestEnd, frame); err != nil {
		t.Fatal(err)
	}
	eth := header.Ethernet(frame)
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if eth.DestinationAddress() != guestMAC || eth.SourceAddress() != gatewayMAC || !ip.IsValid(len(ip)) || !ip.IsChecksumValid() ||
		ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) || netip.AddrFrom4(ip.SourceAddress().As4()) != GatewayAddr ||
		netip.AddrFrom4(ip.DestinationAddress().As4()) != egresstest.Addr {
		t.Fatalf("answer %x is not an IPv4 ICMP packet from the gateway to the guest", frame)
	}
	icmp := header.ICMPv4(ip.Payload())
	if icmp.Type() != header.ICMPv4DstUnreachable || icmp.Code() != header.ICMPv4AdminProhibited {
		t.Errorf("ICMP type %d code %d, want 3 and 13", icmp.Type(), icmp.Code())
	}
	if got, want := []byte(icmp[header.ICMPv4MinimumSize:]), syn[header.EthernetMinimumSize:header.EthernetMinimumSize+header.IPv4MinimumSize+8]; string(got) != string(want) {
		t.Errorf("quoted %x, want the SYN's header and first 8 bytes %x", got, want)
	}
	if checksum.Checksum(icmp, 0) != 0xffff {
		t.Errorf("ICMP checksum does not verify")
	}

	// The rest of such a connection (and other traffic there) is dropped
	// without another event.
	send(tcpFrame(egresstest.Addr, loop, 8009, header.TCPFlagAck))
	send(tcpFrame(egresstest.Addr, netip.MustParseAddr("127.5.6.7"), 22, header.TCPFlagSyn))
	select {
	case f := <-flows:
		if f.Dest.Addr != netip.MustParseAddr("127.5.6.7") || f.Dest.Port != 22 {
			t.Errorf("after an ACK, flow %+v; want only the second SYN's", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a SYN to 127.5.6.7 made no flow")
	}
}
