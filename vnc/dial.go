package vnc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// QEMU listens on its VNC socket with a backlog of one, and accepts from
// its main loop, which a busy guest (TCG) holds for milliseconds at a
// time. A connect to a unix socket whose backlog is full fails at once
// with EAGAIN instead of waiting: a viewer that reconnects back to back
// (each connection QEMU has not yet taken in counts) got a 502 about one
// time in four. Such a refusal is retried until the dial's context ends.
const (
	dialRetryFirst = time.Millisecond
	dialRetryMax   = 50 * time.Millisecond
)

// dialRetry calls dial until it succeeds, fails for another reason than a
// full backlog, or ctx ends; the last error says how many tries it took.
func dialRetry(ctx context.Context, dial Dialer) (net.Conn, error) {
	wait := dialRetryFirst
	for tries := 1; ; tries++ {
		conn, err := dial(ctx)
		if err == nil || !errors.Is(err, syscall.EAGAIN) {
			return conn, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("the VNC server took no new connection in %d tries (its queue of connections stayed full): %w", tries, err)
		case <-t.C:
		}
		wait = min(2*wait, dialRetryMax)
	}
}
