// Package settle waits for a machine's screen to stop changing, through a
// screen mirror of its own. Baking uses it after the guest reports ready.
package settle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/vnc"
)

// Machine waits until m's screen has shown a first frame and then stayed
// unchanged for quiet (or timeout passed).
func Machine(ctx context.Context, m desktop.Machine, quiet, timeout time.Duration, log *slog.Logger) (screenshot.Settle, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mirror := vnc.NewMirror(vnc.MirrorOptions{Dial: m.DialVNC, Logger: log})
	go mirror.Run(ctx)
	select {
	case <-mirror.Ready():
	case <-ctx.Done():
		return screenshot.Settle{}, fmt.Errorf("screen: no first frame: %w", ctx.Err())
	}
	return screenshot.WaitSettled(ctx, mirror, quiet, timeout)
}
