package config

import (
	"strings"
	"testing"
	"time"
)

func TestServeCheck(t *testing.T) {
	if err := DefaultServe().Check(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for flag, mutate := range map[string]func(*Serve){
		"max-viewers-per-desktop": func(s *Serve) { s.MaxViewersPerDesktop = 0 },
		"max-viewers-per-token":   func(s *Serve) { s.MaxViewersPerToken = s.MaxViewersPerDesktop + 1 },
		"screenshot-encodes":      func(s *Serve) { s.ScreenshotEncodes = -1 },
		"http-header-timeout":     func(s *Serve) { s.HeaderTimeout = 0 },
		"http-idle-timeout":       func(s *Serve) { s.IdleTimeout = -time.Second },
		// With an existing etcd for the records too: the hosts' APIs
		// speak TLS whatever holds the records.
		"cluster-certs":  func(s *Serve) { s.Cluster.Name, s.Cluster.Endpoints = "f", "http://127.0.0.14:2379" },
		"cluster-lease":  func(s *Serve) { s.Cluster.Name, s.Cluster.Certs, s.Cluster.Lease = "f", "/certs", time.Second },
		"etcd-endpoints": func(s *Serve) { s.Cluster.Endpoints = "http://127.0.0.14:2379" },
		"etcd-cert": func(s *Serve) {
			s.Cluster.Name, s.Cluster.Certs, s.Cluster.Endpoints, s.Cluster.EtcdCA = "f", "/certs", "https://127.0.0.14:2379", "/ca.pem"
		},
		"cluster-api-port": func(s *Serve) {
			s.Cluster.Name, s.Cluster.Certs, s.Cluster.APIPort = "f", "/certs", 70000
		},
	} {
		s := DefaultServe()
		mutate(&s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), "--"+flag) {
			t.Errorf("%s out of range: %v, want an error naming the flag", flag, err)
		}
	}
}

func TestQEMUUIDRange(t *testing.T) {
	for _, c := range []struct {
		in         string
		unconfined bool
		bad        bool
	}{{in: ""}, {in: "off", unconfined: true}, {in: "200000-200999"}, {in: "nope", bad: true}} {
		r, unconfined, err := Serve{QEMUUIDs: c.in}.QEMUUIDRange()
		if (err != nil) != c.bad || unconfined != c.unconfined {
			t.Errorf("%q: %v, %v, %v", c.in, r, unconfined, err)
		}
		if c.bad && (err == nil || !strings.Contains(err.Error(), "--qemu-uids")) {
			t.Errorf("%q: error %v does not name the flag", c.in, err)
		}
	}
}
