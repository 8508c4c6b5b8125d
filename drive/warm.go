package drive

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/devtools"
)

// WarmPooled readies a machine the warm pool restored ahead for what a
// client does first with a new desktop. Under TCG a restored guest runs
// every code path slowly the first time, while QEMU translates it again:
// Playwright's connectOverCDP took 1.4 s right after a create, 0.8 s on a
// guest left idle for seconds, and 0.2 s when it had connected once
// before. So the pool sets the guest's clock (which also takes the guest
// agent's path once) and, in a browser desktop, does what a DevTools
// client does first: discovery,
// the browser's socket, attaching to each page and enabling the domains
// Playwright enables. Nothing of it stays: the session detaches and
// closes, and the desktop's own clock and identity are set when it is
// taken. The machine is ready once its guest has gone idle after all that
// (at most warmSettleBound): a browser goes on working for a while after a
// DevTools session ends, and a create taking it meanwhile had Playwright's
// connect four times as slow (p50 1.23 s against 0.30 s in two bench runs
// back to back, docs/BENCHMARKS.md).
func WarmPooled(ctx context.Context, m desktop.Machine, s desktop.Snapshot) error {
	if err := warmGuest(ctx, m, s); err != nil {
		return err
	}
	_, err := newCPUMeter(m.VCPUTime).waitIdle(ctx, warmSettleBound)
	return err
}

// warmSettleBound bounds the wait for a warmed pool machine's guest to go
// idle: a busy host may keep it from ever looking idle.
const warmSettleBound = 5 * time.Second

func warmGuest(ctx context.Context, m desktop.Machine, s desktop.Snapshot) error {
	if err := desktop.SetTime(ctx, m.Agent(), time.Now()); err != nil {
		return err
	}
	if s.Manifest.Image.Flavor != ChromiumFlavor {
		return nil
	}
	dialer, ok := m.(desktop.DevToolsDialer)
	if !ok {
		return nil
	}
	conn, err := dialer.DialDevTools(ctx)
	if err != nil {
		return fmt.Errorf("the DevTools bridge's port: %w", err)
	}
	sess, err := devtools.Open(ctx, conn)
	if err != nil {
		return err
	}
	defer sess.Close()
	return devtools.Warm(ctx, func(ctx context.Context, _, _ string) (net.Conn, error) { return sess.Dial(ctx) })
}
