package recording

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/warmdesk/warmdesk/desktop"
)

// OpenRegistry starts hostd's recordings' registry in dir, emptied first:
// a recording does not outlive the hostd that made it (its frames would
// never be encoded, nor listed). The registry tells m's events when a
// recording starts and ends (the viewer's REC mark), and follows them
// until stop.
func OpenRegistry(ctx context.Context, dir string, m *desktop.Manager, log *slog.Logger) (reg *Registry, stop func(), err error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, fmt.Errorf("recordings left by an earlier hostd: %w", err)
	}
	reg = NewRegistry(dir, Options{}, log, func(id string, in Info) {
		summary := "recording " + in.ID + " started"
		if in.State != StateRecording {
			summary = "recording " + in.ID + " ended: " + in.Reason
		}
		m.Events().Announce(id, desktop.EventRecording, summary)
	})
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go reg.Follow(fctx, m.Events())
	return reg, stop, nil
}
