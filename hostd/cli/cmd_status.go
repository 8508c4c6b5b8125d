package cli

import (
	"context"
	"fmt"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/hostd/config"
)

// cmdStatus prints what the running daemon admits now.
func cmdStatus(ctx context.Context, e *env, args []string) error {
	c, err := daemonCommand(e, "status", args)
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

// daemonCommand reads the flags of a command that takes only the daemon's
// paths and no arguments, and returns a client of the running daemon.
func daemonCommand(e *env, name string, args []string) (*client.Client, error) {
	fs := flags(e, name)
	paths := config.DefaultPaths()
	paths.Register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usagef("%s takes no arguments (got %q)", name, pos)
	}
	return daemonClient(paths)
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
