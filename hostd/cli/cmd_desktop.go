package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/netpolicy"
)

func cmdDesktop(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "desktop", args, map[string]func(context.Context, *env, []string) error{
		"create":    desktopCreate,
		"list":      desktopList,
		"get":       desktopGet,
		"rm":        desktopRemove,
		"pause":     desktopOp("pause"),
		"resume":    desktopOp("resume"),
		"hibernate": desktopOp("hibernate"),
		"wake":      desktopOp("wake"),
		"reset":     desktopReset,
		"record":    desktopRecord,
		"fork":      desktopFork,
		"snapshot":  desktopSnapshot,
		"network":   desktopNetwork,
	})
}

// connect parses the common flags and returns a client for the daemon.
func connect(e *env, name string, args []string, extra func(*flagSet)) ([]string, *client.Client, error) {
	return connectAs(e, "desktop "+name, args, extra)
}

// connectAs is connect for a command of another group (volume create).
func connectAs(e *env, command string, args []string, extra func(*flagSet)) ([]string, *client.Client, error) {
	fs := flags(e, command)
	paths := config.DefaultPaths()
	paths.Register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parse(fs, args)
	if err != nil {
		return nil, nil, err
	}
	c, err := daemonClient(paths)
	return pos, c, err
}

func printDesktops(e *env, ds []api.Desktop, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(ds)
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tSNAPSHOT\tAGE\tCONTROL\tVIEWER")
	for _, d := range ds {
		state := d.State
		if d.Reason != "" {
			state += " (" + d.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Name, state, d.Snapshot,
			time.Since(d.CreatedAt).Round(time.Second), d.Control.Holder, d.URLs.Viewer)
	}
	return tw.Flush()
}

func desktopCreate(ctx context.Context, e *env, args []string) error {
	var req api.CreateDesktop
	var ttl time.Duration
	var asJSON bool
	_, c, err := connect(e, "create", args, func(fs *flagSet) {
		fs.StringVar(&req.Snapshot, "snapshot", "minimal", "snapshot to restore")
		fs.StringVar(&req.Name, "name", "", "desktop name")
		fs.DurationVar(&ttl, "ttl", 0, "delete the desktop after this long (0: never)")
		policyFlags(fs, &req.Network)
		fs.Func("volume", "attach a volume (repeat): NAME:/MOUNT[:ro]", func(v string) error {
			m, err := parseVolumeFlag(v)
			req.Volumes = append(req.Volumes, m)
			return err
		})
		clockFlag(fs, &req.Clock)
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	req.TTL = api.Duration(ttl)
	start := time.Now()
	d, err := c.CreateDesktop(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(d)
	}
	fmt.Fprintf(e.stderr, "created in %s\n", time.Since(start).Round(time.Millisecond))
	return printDesktops(e, []api.Desktop{d}, false)
}

// policyFlags reads an egress policy from --network and repeated --allow.
func policyFlags(fs *flagSet, p *api.NetworkPolicy) {
	fs.Func("network", "egress policy: none (default), allow (only --allow entries) or open (public addresses)", func(v string) error {
		p.Mode = v
		return nil
	})
	fs.Func("allow", "an allowed destination (repeat): *.example.com:443, 203.0.113.0/24, host:3000; implies --network allow", func(v string) error {
		p.Allow = append(p.Allow, v)
		if p.Mode == "" {
			p.Mode = string(netpolicy.Allow)
		}
		return nil
	})
}

// desktopNetwork shows a desktop's egress policy, or replaces it when
// --network or --allow is given.
func desktopNetwork(ctx context.Context, e *env, args []string) error {
	var p api.NetworkPolicy
	pos, c, err := connect(e, "network", args, func(fs *flagSet) { policyFlags(fs, &p) })
	if err != nil {
		return err
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	path := "/v1/desktops/" + url.PathEscape(id) + "/network"
	var got api.NetworkPolicy
	if p.Mode == "" {
		err = c.Do(ctx, http.MethodGet, path, nil, &got)
	} else {
		err = c.Do(ctx, http.MethodPut, path, p, &got)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(got)
}

func desktopList(ctx context.Context, e *env, args []string) error {
	var asJSON bool
	_, c, err := connect(e, "list", args, func(fs *flagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") })
	if err != nil {
		return err
	}
	ds, err := c.Desktops(ctx)
	if err != nil {
		return err
	}
	return printDesktops(e, ds, asJSON)
}

func oneID(pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("want one desktop id")
	}
	return pos[0], nil
}

func desktopGet(ctx context.Context, e *env, args []string) error {
	pos, c, err := connect(e, "get", args, nil)
	if err != nil {
		return err
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	d, err := c.Desktop(ctx, id)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

func desktopRemove(ctx context.Context, e *env, args []string) error {
	pos, c, err := connect(e, "rm", args, nil)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want desktop ids")
	}
	for _, id := range pos {
		if err := c.DeleteDesktop(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted %s\n", id)
	}
	return nil
}

func desktopOp(op string) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		pos, c, err := connect(e, op, args, nil)
		if err != nil {
			return err
		}
		id, err := oneID(pos)
		if err != nil {
			return err
		}
		start := time.Now()
		d, err := c.Op(ctx, id, op)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s is %s (%s took %s)\n", d.ID, d.State, op, time.Since(start).Round(time.Millisecond))
		return nil
	}
}

func desktopReset(ctx context.Context, e *env, args []string) error {
	var req api.Reset
	pos, c, err := connect(e, "reset", args, func(fs *flagSet) { clockFlag(fs, &req.Clock) })
	if err != nil {
		return err
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	start := time.Now()
	d, err := c.Reset(ctx, id, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s is %s again from %s (reset took %s)\n", d.ID, d.State, d.Snapshot, time.Since(start).Round(time.Millisecond))
	return nil
}

// clockFlag reads --clock, the guest's wall-clock time in RFC 3339.
func clockFlag(fs *flagSet, clock **time.Time) {
	fs.Func("clock", "the guest's wall-clock time to start from, RFC 3339 (2026-01-01T09:00:00Z); default: the host's", func(v string) error {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("use RFC 3339, such as 2026-01-01T09:00:00Z: %w", err)
		}
		*clock = &t
		return nil
	})
}

func desktopFork(ctx context.Context, e *env, args []string) error {
	n := 1
	pos, c, err := connect(e, "fork", args, func(fs *flagSet) { fs.IntVar(&n, "n", 1, "number of copies") })
	if err != nil {
		return err
	}
	if len(pos) == 2 {
		if n, err = strconv.Atoi(pos[1]); err != nil {
			return usagef("copies: %v", err)
		}
		pos = pos[:1]
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	start := time.Now()
	ds, err := c.Fork(ctx, id, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "forked %d copies in %s\n", len(ds), time.Since(start).Round(time.Millisecond))
	return printDesktops(e, ds, false)
}

func desktopSnapshot(ctx context.Context, e *env, args []string) error {
	var name string
	pos, c, err := connect(e, "snapshot", args, func(fs *flagSet) { fs.StringVar(&name, "name", "", "name of the new snapshot") })
	if err != nil {
		return err
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	if name == "" {
		return usagef("--name is required")
	}
	s, err := c.Snapshot(ctx, id, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "snapshot %s made of %s\n", s.Name, id)
	return nil
}
