package cli

import (
	"context"
	"fmt"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/hostd/config"
)

// cmdStatus prints what the running daemon admits now.
func cmdStatus(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "status")
	paths := config.DefaultPaths()
	paths.Register(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	h, err := c.Host(ctx)
	if err != nil {
		return err
	}
	fmt.Fprint(e.stdout, hostStatus(h))
	return nil
}

// hostStatus is the status command's text.
func hostStatus(h api.Host) string {
	admission := "no admission by CPU (--max-cpu-pressure 0)"
	if h.CPU.Bound > 0 {
		admission = fmt.Sprintf("creates, forks and wakes queue at %.0f%% or more; %d waiting, %d admitted after waiting, %d refused", 100*h.CPU.Bound, h.CPU.Queued, h.CPU.Admitted, h.CPU.Refused)
	}
	return fmt.Sprintf("desktops   %d of %d\nmemory     %d of %d MiB\ncpu        %.0f%% pressure over the last %.0f s (%s)\nadmission  %s\n",
		h.Desktops, h.MaxDesktops, h.MemoryMiB, h.MaxMemoryMiB, 100*h.CPU.Pressure, h.CPU.WindowS, h.CPU.Source, admission)
}
