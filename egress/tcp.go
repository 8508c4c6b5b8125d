package egress

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/warmdesk/warmdesk/netpolicy"
)

// sniffWait is how long a refused connection waits for the guest's first
// bytes, to tell an HTTP client why in a response it can show.
const sniffWait = 3 * time.Second

// maxRefusedHead bounds what hostd reads of a refused request.
const maxRefusedHead = 16 << 10

// forward handles one SYN from the guest: decide, then carry or refuse.
func (n *Network) forward(r *tcp.ForwarderRequest) {
	id := r.ID()
	addr := netip.AddrFrom4(id.LocalAddress.As4())
	dest := n.dest(addr, id.LocalPort)
	flow := Flow{Dest: dest, Start: time.Now()}
	v := n.decide(dest)
	flow.Allowed, flow.Entry, flow.Reason = v.Allowed, v.Entry, v.Reason
	if !v.Allowed {
		n.refuse(r, &flow)
		return
	}
	select {
	case n.flows <- struct{}{}:
		defer func() { <-n.flows }()
	default:
		flow.Allowed, flow.Entry = false, ""
		flow.Reason = fmt.Sprintf("this desktop has %d connections open, the most it may", n.cfg.MaxFlows)
		n.refuse(r, &flow)
		return
	}
	target := net.JoinHostPort(addr.String(), strconv.Itoa(int(id.LocalPort)))
	if dest.Host {
		target = net.JoinHostPort(n.cfg.HostAddr.String(), strconv.Itoa(int(id.LocalPort)))
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	up, err := n.cfg.Dial(ctx, "tcp", target)
	cancel()
	if err != nil {
		// The guest sees what it would see from the destination itself: a
		// reset.
		r.Complete(true)
		flow.Reason = "dial: " + err.Error()
		n.report(flow)
		return
	}
	// The desktop's network closing ends its connections.
	stop := context.AfterFunc(n.ctx, func() { up.Close() })
	defer stop()
	guest, ok := n.accept(r)
	if !ok {
		up.Close()
		flow.Reason = "guest went away"
		n.report(flow)
		return
	}
	flow.Sent, flow.Received = splice(guest, up)
	n.report(flow)
}

func (n *Network) report(f Flow) {
	f.Duration = time.Since(f.Start)
	n.cfg.OnFlow(f)
}

// dest names where a guest connection goes, for the policy.
func (n *Network) dest(addr netip.Addr, port uint16) netpolicy.Dest {
	if addr == GatewayAddr {
		return netpolicy.Dest{Name: HostAlias, Addr: addr, Port: port, Host: true}
	}
	names := n.names.names(addr)
	d := netpolicy.Dest{Addr: addr, Port: port}
	if len(names) > 0 {
		d.Name = names[len(names)-1]
	}
	return d
}

// decide decides a connection. An address hostd resolved for several
// names (a CDN) is allowed if any of them is.
func (n *Network) decide(d netpolicy.Dest) netpolicy.Verdict {
	if d.Addr == DNSAddr {
		return netpolicy.Verdict{Reason: DNSAddr.String() + " serves DNS over UDP only"}
	}
	rules := n.rules()
	if d.Host {
		return rules.Decide(d)
	}
	names := n.names.names(d.Addr)
	if len(names) == 0 {
		return rules.Decide(d)
	}
	var first netpolicy.Verdict
	for i, name := range names {
		d.Name = name
		v := rules.Decide(d)
		if v.Allowed {
			return v
		}
		if i == 0 {
			first = v
		}
	}
	return first
}

// accept completes the guest's handshake.
func (n *Network) accept(r *tcp.ForwarderRequest) (net.Conn, bool) {
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		r.Complete(true)
		return nil, false
	}
	r.Complete(false)
	ep.SocketOptions().SetKeepAlive(true)
	return gonet.NewTCPConn(&wq, ep), true
}

// maxSniffing bounds the refused connections a desktop holds open at once
// to answer them; beyond it a refusal is a plain reset.
const maxSniffing = 64

// refuse ends a refused connection. If the guest speaks HTTP first, it gets
// a 403 that says why, so an agent or a person sees the reason instead of a
// bare connection error; any other protocol gets the connection closed.
func (n *Network) refuse(r *tcp.ForwarderRequest, f *Flow) {
	defer n.report(*f)
	if n.sniffing.Add(1) > maxSniffing {
		n.sniffing.Add(-1)
		r.Complete(true)
		return
	}
	defer n.sniffing.Add(-1)
	c, ok := n.accept(r)
	if !ok {
		return
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(sniffWait))
	// Bounded: the guest is not owed more than a request head's worth of
	// hostd's memory for a refusal.
	br := bufio.NewReaderSize(io.LimitReader(c, maxRefusedHead), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetWriteDeadline(time.Now().Add(sniffWait))
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" || f.Dest.Host {
		host = f.Dest.String()
	}
	writeBlocked(c, host, f.Reason, strings.Contains(req.Header.Get("Accept"), "text/html"))
}

// BlockedText is the first line of the body a refused HTTP request gets.
func BlockedText(host string) string {
	return "blocked by this desktop's egress policy: " + host + " is not allowed"
}

// BlockedTitle is the title of the page a browser shows for a refused
// request.
const BlockedTitle = "Blocked by this desktop's egress policy"

// writeBlocked answers a refused HTTP request: plain text, or a small page
// for a browser (its title says it, so a person sees why in the tab).
func writeBlocked(w io.Writer, host, reason string, page bool) {
	ctype := "text/plain; charset=utf-8"
	body := BlockedText(host) + "\n" + reason + "\n"
	if page {
		ctype = "text/html; charset=utf-8"
		body = "<!doctype html><title>" + html.EscapeString(BlockedTitle) + "</title><pre>" + html.EscapeString(body) + "</pre>\n"
	}
	fmt.Fprintf(w, "HTTP/1.1 403 Forbidden\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\nX-Warmdesk-Egress: blocked\r\n\r\n%s", ctype, len(body), body)
}

// splice copies both ways until both directions end, and returns the bytes
// from a and from b.
func splice(a, b net.Conn) (fromA, fromB int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fromB, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	fromA, _ = io.Copy(b, a)
	closeWrite(b)
	wg.Wait()
	a.Close()
	b.Close()
	return fromA, fromB
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// fullAddr is a gVisor address from a netip one.
func fullAddr(a netip.Addr, port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(a.As4()), Port: port}
}
