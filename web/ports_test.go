package web_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/egress"
	"github.com/warmdesk/warmdesk/egress/egresstest"
	"github.com/warmdesk/warmdesk/netpolicy"
	"github.com/warmdesk/warmdesk/web"
)

// guestNet is a desktop's real egress network with egresstest's guest
// stack on it, as drive's GuestDialer.
type guestNet struct{ n *egress.Network }

func (g guestNet) DialGuest(ctx context.Context, _ string, port uint16) (net.Conn, error) {
	return g.n.DialGuest(ctx, port)
}

// The port proxy through a real egress network to a guest network stack:
// a served port answers; a port where nothing listens (or, in a real
// guest, a server bound only to its 127.0.0.1, which refuses the same
// way) is a 502 that says so, not a 500.
func TestPortProxyAnswersAClosedPortWithABadGateway(t *testing.T) {
	n, err := egress.New(egress.Config{
		Rules: func() (*netpolicy.Rules, error) { return netpolicy.Compile(netpolicy.Policy{}, nil) },
		Dial: func(context.Context, string, string) (net.Conn, error) {
			t.Error("the guest dialled out")
			return nil, io.EOF
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, io.EOF },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hostEnd, guestEnd, err := egresstest.Pair()
	if err != nil {
		t.Fatal(err)
	}
	n.Attach(hostEnd)
	g, err := egresstest.NewGuest(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ln, err := g.Listen(8000)
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served from the guest "+r.URL.Path) }))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens, Guests: guestNet{n}})
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: actToken}).Handler())
	t.Cleanup(hs.Close)
	get := func(path string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/desktops/"+f.ID+path, nil)
		req.Header.Set("Authorization", "Bearer "+actToken)
		c := http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if status, body := get("/ports/8000/x"); status != http.StatusOK || string(body) != "served from the guest /x" {
		t.Errorf("a served port: %d %s", status, body)
	}
	status, body := get("/ports/8009/")
	code, _, _, msg := actError(t, body)
	if status != http.StatusBadGateway || code != "bad_gateway" || !strings.Contains(msg, "nothing listens on port 8009") || !strings.Contains(msg, "127.0.0.1") {
		t.Errorf("a port nothing listens on: %d %s", status, body)
	}
}
