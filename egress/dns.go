package egress

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	dnsTTL       = 30 // seconds: short, so a policy change is not outlived by caches
	dnsTimeout   = 5 * time.Second
	maxDNSFlight = 32
)

// serveDNS answers the guest's queries to 10.0.2.3:53 until the network
// closes. Only names the policy allows are resolved (by hostd); the others
// get NXDOMAIN, so a refused name fails fast and nothing about it leaves
// the host. "host" is the gateway.
func (n *Network) serveDNS(conn net.PacketConn) {
	defer conn.Close()
	go func() { <-n.ctx.Done(); conn.Close() }()
	flight := make(chan struct{}, maxDNSFlight)
	buf := make([]byte, 1500)
	for {
		size, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		query := append([]byte(nil), buf[:size]...)
		select {
		case flight <- struct{}{}:
		default:
			continue // the guest retries; hostd does not queue without bound
		}
		go func() {
			defer func() { <-flight }()
			ctx, cancel := context.WithTimeout(n.ctx, dnsTimeout)
			defer cancel()
			if reply := n.answer(ctx, query); reply != nil {
				conn.WriteTo(reply, from)
			}
		}()
	}
}

// answer builds the reply to one query, or nil for a message that is not
// one (dropped, as a server would).
func (n *Network) answer(ctx context.Context, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	reply := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	var addrs []netip.Addr
	switch {
	case q.Class != dnsmessage.ClassINET:
		reply.RCode = dnsmessage.RCodeNotImplemented
	case name == HostAlias:
		addrs = []netip.Addr{GatewayAddr}
	case !n.rules().AllowsName(name):
		reply.RCode = dnsmessage.RCodeNameError
	case q.Type == dnsmessage.TypeA:
		found, err := n.cfg.Resolve(ctx, name)
		if err != nil {
			reply.RCode = dnsmessage.RCodeServerFailure
			if dnsErr, ok := err.(*net.DNSError); ok && dnsErr.IsNotFound {
				reply.RCode = dnsmessage.RCodeNameError
			}
		}
		for _, a := range found {
			if a = a.Unmap(); a.Is4() {
				addrs = append(addrs, a)
				n.names.remember(a, name)
			}
		}
	}
	b := dnsmessage.NewBuilder(nil, reply)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if b.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// nameMemo remembers which names an address was resolved for, so that a
// connection to it is decided by the names the guest asked for (several
// for a CDN's address, the latest last). Bounded: when full it starts over
// (a forgotten address is decided as an address).
type nameMemo struct {
	mu     sync.Mutex
	max    int
	byAddr map[netip.Addr][]string
}

// namesPerAddr bounds the names remembered for one address.
const namesPerAddr = 8

func newNameMemo(max int) *nameMemo {
	return &nameMemo{max: max, byAddr: map[netip.Addr][]string{}}
}

func (m *nameMemo) remember(a netip.Addr, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.byAddr) >= m.max {
		clear(m.byAddr)
	}
	ns := slices.DeleteFunc(m.byAddr[a], func(n string) bool { return n == name })
	if len(ns) >= namesPerAddr {
		ns = ns[1:]
	}
	m.byAddr[a] = append(ns, name)
}

func (m *nameMemo) names(a netip.Addr) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.byAddr[a])
}
