package app

import (
	"log/slog"

	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/volume"
)

// openVolumes opens the volume registry in the state directory.
func openVolumes(cfg config.Serve, st volume.Store, log *slog.Logger) (*volume.Registry, error) {
	return volume.Open(volume.Config{Dir: cfg.Volumes(), Store: st, MaxSizeMiB: cfg.Limits.MaxDiskMiB, Logger: log})
}
