package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Connect opens a client to the fleet's etcd (the embedded members, or an
// existing cluster's --etcd-endpoints) and checks, until ctx ends, that it
// answers.
func Connect(ctx context.Context, endpoints []string, files *TLSFiles) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("fleet: no etcd endpoints")
	}
	var tlsConfig *tls.Config
	if files != nil {
		info := transport.TLSInfo{CertFile: files.Cert, KeyFile: files.Key, TrustedCAFile: files.CA}
		var err error
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("fleet: etcd client TLS: %w", err)
		}
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		TLS:         tlsConfig,
		Logger:      zap.NewNop(),
		// A member that stops answering is left for another at once.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd client: %w", err)
	}
	// Linearizable: it needs a majority, which is what "answers" means.
	if _, err := c.Get(ctx, "health"); err != nil {
		c.Close()
		return nil, fmt.Errorf("fleet: etcd at %v does not answer: %w", endpoints, err)
	}
	return c, nil
}
