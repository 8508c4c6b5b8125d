package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/config"
)

func cmdCluster(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "cluster", args, map[string]func(context.Context, *env, []string) error{
		"certs": clusterCerts,
	})
}

// clusterCerts writes the fleet's CA and one certificate per host.
func clusterCerts(_ context.Context, e *env, args []string) error {
	fs := flags(e, "cluster certs")
	dir := fs.String("dir", "", "directory to write the certificates into (must not hold a CA already)")
	name := fs.String("cluster-name", "", "the fleet's name")
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
	if err := fleet.WriteCerts(*dir, *name, hosts, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote the fleet's CA and %d host certificates to %s: copy ca.pem, NAME.pem and NAME-key.pem to each host's --cluster-certs directory\n", len(hosts), *dir)
	return nil
}

func cmdFleet(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "fleet", args, map[string]func(context.Context, *env, []string) error{
		"status": fleetStatus,
	})
}

// fleetStatus prints the fleet's hosts, as the running hostd sees them.
func fleetStatus(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "fleet status")
	paths := config.DefaultPaths()
	paths.Register(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	f, err := c.Fleet(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "fleet %s, seen from %s: %d hosts, etcd led by %s\n", f.Name, f.Self, len(f.Hosts), f.Leader)
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HOST\tADDRESS\tDESKTOPS\tMEMORY MiB\tRESTORES\tSNAPSHOTS")
	for _, h := range f.Hosts {
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%d/%d\t%s %s %s\t%s\n", h.Name, h.Address, h.Desktops, h.MaxDesktops, h.UsedMemoryMiB, h.MemoryMiB, h.QEMU, h.Machine, h.Accel, strings.Join(h.Snapshots, ","))
	}
	return w.Flush()
}
