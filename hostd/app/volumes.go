package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/volume"
)

// openVolumes opens the volume registry in the state directory.
func openVolumes(cfg config.Serve, st volume.Store, log *slog.Logger) (*volume.Registry, error) {
	return volume.Open(volume.Config{Dir: cfg.Volumes(), Store: st, MaxSizeMiB: cfg.Limits.MaxDiskMiB, Logger: log})
}

// checkVolumes checks the disk of every volume no desktop holds, at
// start: one a crash damaged is marked so, and never attached.
func checkVolumes(ctx context.Context, m *desktop.Manager, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, v := range m.Volumes().List() {
		if len(m.VolumeHolders(v.Name)) > 0 || v.Frozen {
			continue
		}
		if err := m.Volumes().Check(ctx, v.Name); err != nil {
			log.Warn("volume not checked", "volume", v.Name, "err", err)
		}
	}
}
