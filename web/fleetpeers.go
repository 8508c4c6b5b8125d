package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// The hosts of a fleet call each other's API on a listener of its own
// (hostd's peer port) over mutual TLS with the fleet's certificates: the
// requests they pass on, snapshot pulls and event streams, each marked
// with proxiedBy. With Config.PeerTLS set, a request so marked that
// reaches the public listener is refused, so the daemon token a host
// passes on never crosses the network in the clear.

// peerLink is how this host calls the other hosts' APIs.
type peerLink struct {
	scheme    string
	transport *http.Transport
}

// newPeerLink calls with cfg's TLS when set, in the clear otherwise (a
// fleet's parts run apart in tests and the bench).
func newPeerLink(cfg Config) peerLink {
	// Straight to the host, never through an HTTP_PROXY of the
	// environment.
	t := &http.Transport{Proxy: nil, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, TLSClientConfig: cfg.PeerTLS}
	if cfg.PeerTLS != nil {
		return peerLink{scheme: "https", transport: t}
	}
	return peerLink{scheme: "http", transport: t}
}

// fromPeer marks a request that came in on the peer listener.
type fromPeer struct{}

// PeerHandler serves the fleet's other hosts: hostd serves it on its
// peer listener, with the TLS that asks each caller for a certificate
// of the fleet's CA (fleet.PeerTLS).
func (s *Server) PeerHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.engine.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), fromPeer{}, true)))
	})
}

// peersOnly refuses a request marked as passed on by another host that
// reached the public listener of a host whose peers speak TLS.
func (s *Server) peersOnly(c *gin.Context) {
	if s.cfg.PeerTLS == nil || c.Request.Header.Get(proxiedBy) == "" || c.Request.Context().Value(fromPeer{}) != nil {
		c.Next()
		return
	}
	abort(c, http.StatusForbidden, "peer_port_only", "a request passed on by another host of the fleet ("+proxiedBy+") is taken on the peer port only, over TLS with the fleet's certificates", "")
}
