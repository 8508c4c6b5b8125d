package fleet

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParsePeers reads --cluster-peers: NAME=ADDRESS pairs separated by
// commas, each host's etcd listening on ADDRESS at peerPort (members) and
// clientPort (clients), over https when tls.
func ParsePeers(raw string, peerPort, clientPort int, tls bool) ([]Peer, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("--cluster-peers is empty: name every host of the fleet, NAME=ADDRESS,NAME=ADDRESS,...")
	}
	for _, p := range []int{peerPort, clientPort} {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("etcd port %d: give 1 to 65535", p)
		}
	}
	if peerPort == clientPort {
		return nil, fmt.Errorf("etcd's peer and client ports are both %d: give two ports", peerPort)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	var out []Peer
	for _, item := range strings.Split(raw, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		if !ok || name == "" || net.ParseIP(addr) == nil && !hostName(addr) {
			return nil, fmt.Errorf("--cluster-peers: %q: write NAME=ADDRESS (an IP or host name, no port), like h1=10.0.0.11", item)
		}
		host := addr
		if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
			host = "[" + addr + "]"
		}
		out = append(out, Peer{
			Name:      name,
			PeerURL:   scheme + "://" + host + ":" + strconv.Itoa(peerPort),
			ClientURL: scheme + "://" + host + ":" + strconv.Itoa(clientPort),
		})
	}
	return out, nil
}

// PeerAddress is the address (no port) a peer's URLs name.
func (p Peer) Address() string {
	u, err := parseMemberURL(p.PeerURL, strings.HasPrefix(p.PeerURL, "https:"))
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// hostName says whether s is a DNS host name: dot-separated labels of
// letters, digits and inner hyphens.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
