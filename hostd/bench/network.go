package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/egress"
	"github.com/warmdesk/warmdesk/egress/egresstest"
	"github.com/warmdesk/warmdesk/netpolicy"
)

const (
	// netHTTPPerN is the number of requests per way in the proxy latency
	// comparison for each sample of --n (300 at the default 20); a real
	// guest fetches --n times.
	netHTTPPerN = 15
	// netBulkMiBPerN is what the throughput measurement carries per
	// sample of --n, up to netBulkMiBMax (256 MiB at the default 20): the
	// smoke test's race-instrumented stack, beside the rest of the suite,
	// once took over its minute for 256 MiB.
	netBulkMiBPerN = 16
	netBulkMiBMax  = 256
)

// testPage is what the loopback test server answers at /.
const testPage = "<!doctype html><title>warmdesk bench</title><p>hello from the host</p>\n"

// networkSuite measures the egress network: creates with policy none
// against allow (alternating, from the warm pool: the policy must not slow
// a create), the latency the egress stack adds to an HTTP request to a
// host service against a direct request (both on a new connection each,
// as curl makes them), its throughput, and a real guest's fetch.
func (e *env) networkSuite(ctx context.Context) error {
	bulkMiB := e.bulkMiB()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bulk" {
			w.Header().Set("Content-Length", strconv.Itoa(bulkMiB<<20))
			buf := make([]byte, 256<<10)
			for i := 0; i < bulkMiB*4; i++ {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, testPage)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	allow := netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(port)}}

	var none, allowed Dist
	e.drv.Warm(e.snap, 1)
	for i := 0; i < 2*e.opts.N; i++ {
		if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
			return err
		}
		p, into := netpolicy.Policy{Mode: netpolicy.None}, &none
		if i%2 == 1 {
			p, into = allow, &allowed
		}
		d, err := e.timeCreateWith(ctx, desktop.CreateRequest{Snapshot: e.snap.Name, Network: p})
		if err != nil {
			return fmt.Errorf("create with network %s: %w", p.Mode, err)
		}
		into.Add(d)
	}
	e.drv.Warm(e.snap, 0)
	e.res.dist("net_create_none", &none)
	e.res.dist("net_create_allow", &allowed)
	e.res.set("net_create_allow_over_none", float64(allowed.Percentile(50))/float64(none.Percentile(50)))
	e.progress("  create from the pool: network none p50 %s, allow p50 %s", none.Percentile(50), allowed.Percentile(50))

	if err := e.egressMicro(ctx, port); err != nil {
		return err
	}
	return e.guestFetches(ctx, allow, port)
}

// egressMicro compares requests to the loopback server made directly with
// the same requests made from a guest network stack through an egress
// network (frames over a socketpair, the policy decided per connection,
// hostd's own dial and copy), and measures the egress network's
// throughput host to guest.
func (e *env) egressMicro(ctx context.Context, port int) error {
	rules, err := netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.Allow, Allow: []string{"host:" + strconv.Itoa(port)}}, nil)
	if err != nil {
		return err
	}
	var d net.Dialer
	n, err := egress.New(egress.Config{
		Rules:   func() (*netpolicy.Rules, error) { return rules, nil },
		Dial:    d.DialContext,
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil },
	})
	if err != nil {
		return err
	}
	defer n.Close()
	netEnd, guestEnd, err := egresstest.Pair()
	if err != nil {
		return err
	}
	n.Attach(netEnd)
	guest, err := egresstest.NewGuest(guestEnd)
	if err != nil {
		return err
	}
	defer guest.Close()
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	viaEgress := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return guest.Dial(ctx, netip.AddrPortFrom(egresstest.Gateway, uint16(port)))
	}}}
	directURL := "http://127.0.0.1:" + strconv.Itoa(port)
	guestURL := "http://host:" + strconv.Itoa(port)
	var dDist, eDist Dist
	for i := 0; i < netHTTPPerN*e.opts.N; i++ {
		// Alternating, so load on the shared host falls on both alike.
		for _, way := range []struct {
			c    *http.Client
			url  string
			into *Dist
		}{{direct, directURL, &dDist}, {viaEgress, guestURL, &eDist}} {
			took, err := timeGet(ctx, way.c, way.url+"/")
			if err != nil {
				return err
			}
			way.into.Add(took)
		}
	}
	e.res.dist("net_http_direct", &dDist)
	e.res.dist("net_http_egress", &eDist)
	e.res.set("net_http_added_p50_ms", ms(eDist.Percentile(50)-dDist.Percentile(50)))
	e.progress("  HTTP request on a new connection: direct p50 %s, through egress p50 %s", dDist.Percentile(50), eDist.Percentile(50))
	for _, way := range []struct {
		key string
		c   *http.Client
		url string
	}{{"net_throughput_direct_mb_s", direct, directURL}, {"net_throughput_mb_s", viaEgress, guestURL}} {
		took, err := timeGet(ctx, way.c, way.url+"/bulk")
		if err != nil {
			return err
		}
		mbs := float64(e.bulkMiB()<<20) / took.Seconds() / 1e6
		e.res.set(way.key, mbs)
		e.progress("  %s: %.0f MB/s", way.key, mbs)
	}
	return nil
}

// bulkMiB is the size of the throughput measurement's body.
func (e *env) bulkMiB() int { return min(netBulkMiBPerN*max(e.opts.N, 1), netBulkMiBMax) }

// timeGet fetches a URL and reads the whole body.
func timeGet(ctx context.Context, c *http.Client, url string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return time.Since(start), nil
}

// guestFetches times curl in a real desktop fetching the host's test page
// through its egress network (curl's own time_total: TCG's cost included).
func (e *env) guestFetches(ctx context.Context, p netpolicy.Policy, port int) error {
	d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: e.snap.Name, Network: p})
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	mach, _, err := e.mgr.Machine(ctx, d.ID, desktop.WaitSetUp)
	if err != nil {
		return err
	}
	var fetch Dist
	for i := 0; i < e.opts.N; i++ {
		res, err := desktop.Exec(ctx, mach.Agent(), desktop.ExecRequest{
			Path: "/usr/bin/curl", Args: []string{"-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "http://host:" + strconv.Itoa(port) + "/"},
			Timeout: 30 * time.Second,
		})
		if err != nil {
			return err
		}
		code, secs, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
		v, err := strconv.ParseFloat(secs, 64)
		if code != "200" || err != nil {
			return fmt.Errorf("guest fetch: %q %q", res.Stdout, res.Stderr)
		}
		fetch.Add(time.Duration(v * float64(time.Second)))
	}
	e.res.dist("net_guest_fetch", &fetch)
	e.progress("  guest curl of the host's page through egress: p50 %s", fetch.Percentile(50))
	return nil
}
