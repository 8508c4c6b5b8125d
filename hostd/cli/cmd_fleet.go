package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/config"
)

func cmdCluster(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "cluster", args, map[string]func(context.Context, *env, []string) error{
		"certs":  clusterCerts,
		"member": clusterMember,
	})
}

// clusterCerts writes the fleet's CA and one certificate per host.
func clusterCerts(_ context.Context, e *env, args []string) error {
	fs := flags(e, "cluster certs")
	dir := fs.String("dir", "", "directory to write the certificates into (must not hold a CA already, unless --add)")
	name := fs.String("cluster-name", "", "the fleet's name")
	add := fs.Bool("add", false, "sign certificates for hosts joining later with the CA already in --dir (its ca-key.pem)")
	var hosts []fleet.CertHost
	fs.Func("host", "a host and the addresses its peers reach it at, NAME=ADDRESS[,ADDRESS...]; repeat for each host", func(v string) error {
		n, addrs, ok := strings.Cut(v, "=")
		if !ok || n == "" || addrs == "" {
			return fmt.Errorf("%q: write NAME=ADDRESS[,ADDRESS...], like h1=10.0.0.11", v)
		}
		hosts = append(hosts, fleet.CertHost{Name: n, Addrs: strings.Split(addrs, ",")})
		return nil
	})
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" || *name == "" {
		return fmt.Errorf("give --dir and --cluster-name, and a --host for each host")
	}
	if *add {
		if len(hosts) == 0 {
			return fmt.Errorf("give a --host for each host to add")
		}
		for _, h := range hosts {
			if err := fleet.AddHostCert(*dir, *name, h, time.Now()); err != nil {
				return err
			}
		}
		fmt.Fprintf(e.stdout, "signed %d host certificates with the fleet's CA in %s: copy ca.pem, NAME.pem and NAME-key.pem to each new host\n", len(hosts), *dir)
		return nil
	}
	if err := fleet.WriteCerts(*dir, *name, hosts, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote the fleet's CA and %d host certificates to %s: copy ca.pem, NAME.pem and NAME-key.pem to each host's --cluster-certs directory; keep ca-key.pem off the hosts, for hosts added later (--add)\n", len(hosts), *dir)
	return nil
}

func cmdFleet(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "fleet", args, map[string]func(context.Context, *env, []string) error{
		"status":  fleetStatus,
		"move":    fleetMove,
		"drain":   func(ctx context.Context, e *env, args []string) error { return fleetDrain(ctx, e, args, true) },
		"undrain": func(ctx context.Context, e *env, args []string) error { return fleetDrain(ctx, e, args, false) },
	})
}

// fleetDrain stops (on) or restarts placing new desktops on a host; with
// --move, a drain then moves every running desktop off the host.
func fleetDrain(ctx context.Context, e *env, args []string, on bool) error {
	verb := map[bool]string{true: "drain", false: "undrain"}[on]
	fs := flags(e, "fleet "+verb)
	paths := config.DefaultPaths()
	paths.Register(fs)
	move := false
	if on {
		fs.BoolVar(&move, "move", false, "then move every running desktop of the host to the others, one at a time")
	}
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("fleet %s takes one host's name", verb)
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	if _, err := c.Drain(ctx, rest[0], on); err != nil {
		return err
	}
	switch {
	case move:
		return moveOff(ctx, e, c, rest[0])
	case on:
		fmt.Fprintf(e.stdout, "%s takes no new desktops; its desktops run on until they are deleted (--move moves them)\n", rest[0])
	default:
		fmt.Fprintf(e.stdout, "%s takes new desktops again\n", rest[0])
	}
	return nil
}

// moveOff moves every running desktop of host to the fleet's other hosts,
// one after the other; those not running (hibernated, paused, failed) stay.
func moveOff(ctx context.Context, e *env, c *client.Client, host string) error {
	ds, err := c.Desktops(ctx)
	if err != nil {
		return err
	}
	var failed, stayed int
	for _, d := range ds {
		if d.Host != host {
			continue
		}
		if d.State != "running" {
			stayed++
			fmt.Fprintf(e.stdout, "%s stays: %s\n", d.ID, d.State)
			continue
		}
		m, err := c.MoveDesktop(ctx, d.ID, "")
		if err != nil {
			failed++
			fmt.Fprintf(e.stderr, "%s: %v\n", d.ID, err)
			continue
		}
		printMove(e, m)
	}
	if failed > 0 {
		return fmt.Errorf("%d desktops of %s did not move; they run on there", failed, host)
	}
	if stayed > 0 {
		fmt.Fprintf(e.stdout, "%s takes no new desktops, and runs only the %d not running (above)\n", host, stayed)
		return nil
	}
	fmt.Fprintf(e.stdout, "%s takes no new desktops, and runs none\n", host)
	return nil
}

// fleetMove moves one running desktop to another host.
func fleetMove(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "fleet move")
	paths := config.DefaultPaths()
	paths.Register(fs)
	to := fs.String("to", "", "the host to move it to (default: the live host, not draining, with the most memory free)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("fleet move takes one desktop's id")
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	m, err := c.MoveDesktop(ctx, rest[0], *to)
	if err != nil {
		return err
	}
	printMove(e, m)
	return nil
}

func printMove(e *env, m api.Move) {
	fmt.Fprintf(e.stdout, "%s moved from %s to %s in %d ms: guest stopped %d+%d ms, requests held %d ms, %.1f MiB of state and %.1f MiB of disk sent\n",
		m.Desktop.ID, m.From, m.To, m.TotalMs, m.DowntimeMs, m.SwitchMs, m.HeldMs, float64(m.StateBytes)/(1<<20), float64(m.DiskBytes)/(1<<20))
}

// fleetStatus prints the fleet's hosts, as the running hostd sees them.
func fleetStatus(ctx context.Context, e *env, args []string) error {
	c, err := daemonCommand(e, "fleet status", args)
	if err != nil {
		return err
	}
	f, err := c.Fleet(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "fleet %s, seen from %s: %d hosts, etcd led by %s\n", f.Name, f.Self, len(f.Hosts), f.Leader)
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HOST\tGEN\tADDRESS\tPEER (TLS)\tDESKTOPS\tMEMORY MiB\tRESTORES\tSNAPSHOTS\t")
	for _, h := range f.Hosts {
		state := ""
		if h.Draining {
			state = "draining"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d/%d\t%d/%d\t%s %s %s\t%s\t%s\n", h.Name, h.Generation, h.Address, h.Peer, h.Desktops, h.MaxDesktops, h.UsedMemoryMiB, h.MemoryMiB, h.QEMU, h.Machine, h.Accel, strings.Join(h.Snapshots, ","), state)
	}
	return w.Flush()
}
