package fleet

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The peer API's TLS takes a caller with a certificate of the fleet's CA
// only: one with none, one of another fleet's CA, and a plaintext request
// are refused; a peer's certificate checks the server's too.
func TestPeerTLSTakesTheFleetsHostsOnly(t *testing.T) {
	certs := func(cluster string) string {
		dir := filepath.Join(t.TempDir(), "certs")
		if err := WriteCerts(dir, cluster, []CertHost{{Name: "h1", Addrs: []string{"127.0.0.1"}}, {Name: "h2", Addrs: []string{"127.0.0.1"}}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	ours, theirs := certs("ours"), certs("theirs")
	h1, err := LoadPeerTLS(HostTLS(ours, "h1"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			name = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, "peer "+name)
	}))
	srv.TLS = h1.Server
	srv.StartTLS()
	t.Cleanup(srv.Close)
	get := func(c *tls.Config) (string, error) {
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: c}}).Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	h2, err := LoadPeerTLS(HostTLS(ours, "h2"))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(h2.Client); err != nil || !strings.Contains(body, "h2") {
		t.Fatalf("a host of the fleet: %q, %v", body, err)
	}
	noCert := h2.Client.Clone()
	noCert.Certificates = nil
	if _, err := get(noCert); err == nil {
		t.Error("a caller with no certificate was served")
	}
	stranger, err := LoadPeerTLS(HostTLS(theirs, "h2"))
	if err != nil {
		t.Fatal(err)
	}
	trustsUs := stranger.Client.Clone()
	trustsUs.RootCAs = h2.Client.RootCAs
	if _, err := get(trustsUs); err == nil {
		t.Error("a caller with another fleet's certificate was served")
	}
	if _, err := get(stranger.Client); err == nil {
		t.Error("a caller that trusts another fleet's CA took this host's certificate")
	}
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, _ := io.ReadAll(conn)
	if strings.Contains(string(reply), "peer ") {
		t.Errorf("a plaintext request was served: %q", reply)
	}
}

// A host's peer address is its advertised host with the peer listener's
// port.
func TestPeerAddress(t *testing.T) {
	if got, err := peerAddress("127.0.0.21:8787", "127.0.0.1:8788"); err != nil || got != "127.0.0.21:8788" {
		t.Errorf("peerAddress = %q, %v", got, err)
	}
	if _, err := peerAddress("no-port", "127.0.0.1:8788"); err == nil {
		t.Error("an advertised address without a port was taken")
	}
}
