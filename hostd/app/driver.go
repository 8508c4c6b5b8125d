package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/hostd/config"
)

// Closer is implemented by drivers that hold background work.
type Closer interface{ Close() }

// NewDriver builds the configured driver. mirrors and cpu (either nil) hold
// pool refills for a desktop's first frame and while the CPUs are busy.
func NewDriver(ctx context.Context, c config.Serve, mirrors *drive.Mirrors, cpu *desktop.CPUAdmission, log *slog.Logger) (desktop.Driver, error) {
	switch c.Driver {
	case "qemu", "":
		opts := qemu.Options{
			RunDir: c.RunDir, DataDir: c.Desktops(), SnapshotsDir: c.Snapshots(), Accel: c.Accel, NoSandbox: c.NoSandbox,
			NoCgroups: c.NoCgroups, RefillGate: mirrors.RefillGate(), RefillWait: cpu.WaitIdle, Warmup: mirrors.Warmup(drive.WarmPooled), Logger: log,
		}
		var err error
		if opts.UIDs, opts.Unconfined, err = c.QEMUUIDRange(); err != nil {
			return nil, err
		}
		// A failed New returns a nil pointer, which must not reach the
		// interface: App.Close would call Close on it.
		d, err := qemu.New(ctx, opts)
		if err != nil {
			return nil, err
		}
		return d, nil
	case "libvirt":
		opts := libvirt.Options{
			URI: c.LibvirtURI, RunDir: c.RunDir, DataDir: c.Desktops(), Accel: c.Accel, NoCgroups: c.NoCgroups, Logger: log,
		}
		var err error
		if opts.UIDs, opts.Unconfined, err = c.QEMUUIDRange(); err != nil {
			return nil, err
		}
		d, err := libvirt.New(ctx, opts)
		if err != nil {
			return nil, err
		}
		return d, nil
	default:
		return nil, fmt.Errorf("--driver %q: use qemu or libvirt", c.Driver)
	}
}
