package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// PeerTLS is this host's side of the mutual TLS the fleet's hosts speak
// on each other's API (requests passed on, snapshot pulls, event
// streams): the certificates `hostd cluster certs` made, also used by
// etcd.
type PeerTLS struct {
	// Server asks every caller for a certificate the fleet's CA signed.
	Server *tls.Config
	// Client presents this host's certificate and trusts only the
	// fleet's CA.
	Client *tls.Config
}

// LoadPeerTLS reads the CA and host's certificate and key from f.
func LoadPeerTLS(f *TLSFiles) (PeerTLS, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return PeerTLS{}, fmt.Errorf("fleet: the fleet's CA for TLS between hosts: %w (hostd cluster certs makes it; copy ca.pem into --cluster-certs)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return PeerTLS{}, fmt.Errorf("fleet: %s holds no PEM certificate: give the ca.pem hostd cluster certs wrote", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return PeerTLS{}, fmt.Errorf("fleet: this host's certificate for TLS between hosts: %w (hostd cluster certs makes NAME.pem and NAME-key.pem per host)", err)
	}
	return PeerTLS{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool},
	}, nil
}

// Peer API bounds: its callers are the fleet's own hosts, each with a
// certificate, so fixed ones serve.
const (
	peerHeaderTimeout = 10 * time.Second
	peerIdleTimeout   = 2 * time.Minute
)

// servePeers serves h to the fleet's other hosts on NodeConfig.APIPort of
// listen's address, over mutual TLS, until Close; it returns the address
// it listens on.
func (n *Node) servePeers(listen string, h http.Handler) (string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("fleet: the address hostd listens on: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(n.cfg.APIPort)))
	if err != nil {
		return "", fmt.Errorf("fleet: listen for the fleet's hosts (--cluster-api-port): %w", err)
	}
	srv := &http.Server{Handler: h, TLSConfig: n.peerTLS.Server, ReadHeaderTimeout: peerHeaderTimeout, MaxHeaderBytes: 64 << 10, IdleTimeout: peerIdleTimeout}
	n.mu.Lock()
	n.peerServer = srv
	n.mu.Unlock()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("the API for the fleet's hosts stopped", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// stopPeers stops serving the other hosts, letting requests in flight
// finish within ctx.
func (n *Node) stopPeers(ctx context.Context) {
	n.mu.Lock()
	srv := n.peerServer
	n.peerServer = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown(ctx)
	}
}
