package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/warmdesk/warmdesk/egress/egresstest"
	"github.com/warmdesk/warmdesk/netpolicy"
)

// A guest for these tests is egresstest's: a second gVisor stack behind a
// socketpair with QEMU's stream framing.
type guest struct{ *egresstest.Guest }

func (g *guest) dial(ctx context.Context, addr netip.Addr, port int) (net.Conn, error) {
	return g.Dial(ctx, netip.AddrPortFrom(addr, uint16(port)))
}

// get fetches a path from addr:port as an HTTP client in the guest would.
func (g *guest) get(t *testing.T, addr netip.Addr, port int, host string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := g.dial(ctx, addr, port)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// resolve asks the network's DNS server from inside the guest.
func (g *guest) resolve(t *testing.T, name string) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	c, err := g.DialUDP(netip.AddrPortFrom(DNSAddr, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := dnsmessage.NewName(name + ".")
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := (&dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: q, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}).Pack()
	buf := make([]byte, 1500)
	for try := 0; try < 5; try++ { // UDP: the first query can race the ARP exchange
		c.Write(msg)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		var out []netip.Addr
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				out = append(out, netip.AddrFrom4(r.A))
			}
		}
		return m.RCode, out
	}
	t.Fatalf("no DNS answer for %s", name)
	return 0, nil
}

// rig is one desktop's network with a guest on it and a policy the test
// changes.
type rig struct {
	net    *Network
	guest  *guest
	mu     sync.Mutex
	policy netpolicy.Policy
	flows  chan Flow
	dialed chan string
}

func newRig(t *testing.T, p netpolicy.Policy, opt func(*Config)) *rig {
	t.Helper()
	r := &rig{policy: p, flows: make(chan Flow, 64), dialed: make(chan string, 64)}
	hostEnd, guestEnd, err := egresstest.Pair()
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	cfg := Config{
		Rules: func() (*netpolicy.Rules, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return netpolicy.Compile(r.policy, nil)
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			r.dialed <- addr
			// Test traffic stays on this machine, whatever the policy let
			// through.
			if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
				return nil, fmt.Errorf("the test rig dials only the loopback, not %s", addr)
			}
			return d.DialContext(ctx, network, addr)
		},
		Resolve: func(ctx context.Context, name string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
		},
		OnFlow: func(f Flow) { r.flows <- f },
	}
	if opt != nil {
		opt(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.Attach(hostEnd)
	r.net = n
	g, err := egresstest.NewGuest(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	r.guest = &guest{g}
	return r
}

func (r *rig) setPolicy(p netpolicy.Policy) {
	r.mu.Lock()
	r.policy = p
	r.mu.Unlock()
}

func (r *rig) flow(t *testing.T) Flow {
	t.Helper()
	select {
	case f := <-r.flows:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no flow reported")
		return Flow{}
	}
}

// hostServer is a test HTTP server on the host's loopback.
func hostServer(t *testing.T, body string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func TestModeNoneRefusesTheHostAndSaysWhy(t *testing.T) {
	port := hostServer(t, "secret")
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.None}, nil)
	code, body, err := r.guest.get(t, GatewayAddr, port, "host")
	if err != nil {
		t.Fatal(err)
	}
	want := BlockedText("host:" + strconv.Itoa(port))
	if code != http.StatusForbidden || !strings.HasPrefix(body, want) {
		t.Fatalf("got %d %q, want 403 starting %q", code, body, want)
	}
	f := r.flow(t)
	if f.Allowed || !f.Dest.Host || !strings.Contains(f.Reason, "mode none") {
		t.Errorf("flow %+v", f)
	}
	select {
	case a := <-r.dialed:
		t.Errorf("a refused connection was dialled: %s", a)
	default:
	}
}

func TestHostServiceEntryReachesOnlyItsPort(t *testing.T) {
	allowed := hostServer(t, "hello from the host")
	other := hostServer(t, "not for the guest")
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(allowed)}}, nil)
	code, body, err := r.guest.get(t, GatewayAddr, allowed, "host")
	if err != nil || code != 200 || body != "hello from the host" {
		t.Fatalf("allowed port: %d %q %v", code, body, err)
	}
	if got := <-r.dialed; got != "127.0.0.1:"+strconv.Itoa(allowed) {
		t.Errorf("dialled %s, want the host's loopback", got)
	}
	f := r.flow(t)
	if !f.Allowed || f.Entry != "host:"+strconv.Itoa(allowed) || f.Received == 0 || f.Sent == 0 {
		t.Errorf("allowed flow %+v", f)
	}
	code, body, err = r.guest.get(t, GatewayAddr, other, "host")
	if err != nil || code != http.StatusForbidden || strings.Contains(body, "not for the guest") {
		t.Fatalf("other port: %d %q %v", code, body, err)
	}
	if f := r.flow(t); f.Allowed {
		t.Errorf("other port's flow allowed: %+v", f)
	}
}

func TestPolicyChangeAppliesToTheNextConnection(t *testing.T) {
	port := hostServer(t, "ok")
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(port)}}, nil)
	if code, _, err := r.guest.get(t, GatewayAddr, port, "host"); err != nil || code != 200 {
		t.Fatalf("before: %d %v", code, err)
	}
	r.setPolicy(netpolicy.Policy{Mode: netpolicy.None})
	if code, _, err := r.guest.get(t, GatewayAddr, port, "host"); err != nil || code != http.StatusForbidden {
		t.Fatalf("after: %d %v", code, err)
	}
}

func TestDNSAnswersOnlyAllowedNamesAndDecidesByName(t *testing.T) {
	port := hostServer(t, "mirror")
	// The test resolver gives a documentation address; the dialer carries
	// connections to it to the loopback test server, so nothing leaves
	// the machine while the decision is made on the real pair of name and
	// public address.
	public := netip.MustParseAddr("203.0.113.7")
	var d net.Dialer
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"pkgs.example.org:80"}}, func(c *Config) {
		c.Resolve = func(ctx context.Context, name string) ([]netip.Addr, error) {
			return []netip.Addr{public}, nil
		}
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "203.0.113.7:80" {
				return nil, fmt.Errorf("unexpected dial %s", addr)
			}
			return d.DialContext(ctx, network, "127.0.0.1:"+strconv.Itoa(port))
		}
	})
	if rc, addrs := r.guest.resolve(t, "host"); rc != dnsmessage.RCodeSuccess || len(addrs) != 1 || addrs[0] != GatewayAddr {
		t.Errorf("host: %v %v", rc, addrs)
	}
	if rc, addrs := r.guest.resolve(t, "other.example.org"); rc != dnsmessage.RCodeNameError || len(addrs) != 0 {
		t.Errorf("a name no entry allows: %v %v", rc, addrs)
	}
	rc, addrs := r.guest.resolve(t, "pkgs.example.org")
	if rc != dnsmessage.RCodeSuccess || len(addrs) != 1 || addrs[0] != public {
		t.Fatalf("allowed name: %v %v", rc, addrs)
	}
	code, body, err := r.guest.get(t, public, 80, "pkgs.example.org")
	if err != nil || code != 200 || body != "mirror" {
		t.Fatalf("allowed name's address: %d %q %v", code, body, err)
	}
	if f := r.flow(t); !f.Allowed || f.Dest.Name != "pkgs.example.org" || f.Entry != "pkgs.example.org:80" {
		t.Errorf("flow %+v", f)
	}
	// The same address on another port is not what the entry names.
	if code, _, err := r.guest.get(t, public, 8080, "pkgs.example.org"); err != nil || code != http.StatusForbidden {
		t.Errorf("other port: %d %v", code, err)
	}
}

func TestConnectionsAreCappedPerDesktop(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(port)}}, func(c *Config) { c.MaxFlows = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		c, err := r.guest.dial(ctx, GatewayAddr, port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: host\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	code, body, err := r.guest.get(t, GatewayAddr, port, "host")
	if err != nil || code != http.StatusForbidden || !strings.Contains(body, "2 connections open") {
		t.Fatalf("third connection: %d %q %v", code, body, err)
	}
}

func TestDialGuestReachesAGuestPort(t *testing.T) {
	r := newRig(t, netpolicy.Policy{}, nil)
	ln, err := r.guest.Listen(8080)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "from the guest")
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := r.net.DialGuest(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "from the guest" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := r.net.DialGuest(ctx, 8081); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a closed guest port: %v, want ECONNREFUSED", err)
	}
}

func TestReadFramesRefusesForeignStreams(t *testing.T) {
	var frames [][]byte
	good := append(binary.BigEndian.AppendUint32(nil, 14), make([]byte, 14)...)
	if err := readFrames(bytes.NewReader(good), func(b []byte) { frames = append(frames, b) }); err != nil || len(frames) != 1 {
		t.Fatalf("one frame: %v %d", err, len(frames))
	}
	if err := readFrames(strings.NewReader("GET / HTTP/1.1\r\n"), func([]byte) {}); err == nil {
		t.Error("an HTTP request was read as frames")
	}
	if err := readFrames(bytes.NewReader(good[:10]), func([]byte) {}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut frame: %v", err)
	}
}

func FuzzReadFrames(f *testing.F) {
	f.Add(append(binary.BigEndian.AppendUint32(nil, 14), make([]byte, 14)...))
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		readFrames(bytes.NewReader(b), func(frame []byte) {
			if len(frame) < 14 || len(frame) > maxFrame {
				t.Fatalf("frame of %d bytes delivered", len(frame))
			}
		})
	})
}

func TestDNSAnswerIgnoresGarbage(t *testing.T) {
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Open}, nil)
	for _, b := range [][]byte{nil, {1, 2, 3}, bytes.Repeat([]byte{0xff}, 64)} {
		if out := r.net.answer(context.Background(), b); out != nil {
			t.Errorf("%x answered: %x", b, out)
		}
	}
}

// BenchmarkNew is what a desktop's network costs to make and end.
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		n, err := New(Config{
			Rules:   func() (*netpolicy.Rules, error) { return nil, nil },
			Dial:    (&net.Dialer{}).DialContext,
			Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil },
		})
		if err != nil {
			b.Fatal(err)
		}
		n.Close()
	}
}

func TestLineGateHoldsBackAFloodAndSumsItUp(t *testing.T) {
	var g lineGate
	t0 := time.Unix(1000, 0)
	passed := 0
	for i := range 50 {
		if ok, held := g.admit(t0.Add(time.Duration(i)*time.Millisecond), 20, i%2 == 0); ok {
			passed++
		} else if held != "" {
			t.Fatalf("a summary within the window: %q", held)
		}
	}
	if passed != 20 {
		t.Fatalf("%d lines passed in one second, want 20", passed)
	}
	ok, held := g.admit(t0.Add(1500*time.Millisecond), 20, false)
	if !ok || !strings.HasPrefix(held, "30 more connections (15 refused)") {
		t.Fatalf("next second: %v %q", ok, held)
	}
}

// A paused guest's QEMU stops reading the NIC's stream; taking the link
// away must not wait for the write that is stuck on it.
func TestDetachDoesNotWaitForAStuckLink(t *testing.T) {
	var l linkSlot
	mine, peer := net.Pipe() // nobody reads peer
	defer peer.Close()
	l.set(mine)
	wrote := make(chan struct{})
	go func() {
		l.write(make([]byte, 1500), true)
		close(wrote)
	}()
	detached := make(chan struct{})
	go func() {
		l.set(nil)
		close(detached)
	}()
	select {
	case <-detached:
	case <-time.After(5 * time.Second):
		t.Fatal("set(nil) waited for a write nobody reads")
	}
	select {
	case <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck write did not end when its link closed")
	}
}

// A name hostd resolved to a private address is refused: a name entry
// never reaches the host's network (DNS rebinding). The guest's SYN ends
// in hostd's stack; nothing is dialled. The private address is only the
// policy's input: the rig's dialer refuses anything off the loopback, so
// even a policy that wrongly allowed it would send nothing off the machine.
func TestANameResolvingToAPrivateAddressIsRefused(t *testing.T) {
	port := 8080
	r := newRig(t, netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"rebind.example.org"}}, func(c *Config) {
		c.Resolve = func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("10.9.9.9")}, nil
		}
	})
	rc, addrs := r.guest.resolve(t, "rebind.example.org")
	if rc != dnsmessage.RCodeSuccess || len(addrs) != 1 {
		t.Fatalf("resolve: %v %v", rc, addrs)
	}
	code, body, err := r.guest.get(t, addrs[0], port, "rebind.example.org")
	if err != nil || code != http.StatusForbidden || !strings.Contains(body, "a private address") {
		t.Fatalf("a private address by name: %d %q %v", code, body, err)
	}
	select {
	case a := <-r.dialed:
		t.Errorf("dialled %s", a)
	default:
	}
}
