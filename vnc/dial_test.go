package vnc

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDialRetryWaitsOutAFullBacklog(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	calls := 0
	dial := func(context.Context) (net.Conn, error) {
		calls++
		if calls < 4 {
			return nil, &net.OpError{Op: "dial", Net: "unix", Err: syscall.EAGAIN}
		}
		return a, nil
	}
	conn, err := dialRetry(context.Background(), dial)
	if err != nil || conn != a || calls != 4 {
		t.Fatalf("dialRetry: %v %v after %d calls, want the connection after 4", conn, err, calls)
	}

	// Another failure is not retried.
	calls = 0
	refused := &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	if _, err := dialRetry(context.Background(), func(context.Context) (net.Conn, error) { calls++; return nil, refused }); !errors.Is(err, syscall.ECONNREFUSED) || calls != 1 {
		t.Fatalf("refused: %v after %d calls, want ECONNREFUSED after 1", err, calls)
	}

	// A backlog that stays full ends with the context, saying so.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = dialRetry(ctx, func(context.Context) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: syscall.EAGAIN}
	})
	if !errors.Is(err, syscall.EAGAIN) || !strings.Contains(err.Error(), "took no new connection") {
		t.Fatalf("a backlog that stays full: %v", err)
	}
}
