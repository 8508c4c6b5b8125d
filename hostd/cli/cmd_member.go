package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/hostd/config"
)

// clusterMember grows and shrinks the fleet's embedded etcd, through the
// running hostd.
func clusterMember(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "cluster member", args, map[string]func(context.Context, *env, []string) error{
		"list":   memberList,
		"add":    memberAdd,
		"remove": memberRemove,
	})
}

func memberList(ctx context.Context, e *env, args []string) error {
	c, err := daemonCommand(e, "cluster member list", args)
	if err != nil {
		return err
	}
	ms, err := c.FleetMembers(ctx)
	if err != nil {
		return err
	}
	return printMembers(e, ms)
}

// memberAdd tells the fleet's etcd of a host and prints how to start it.
func memberAdd(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "cluster member add")
	paths := config.DefaultPaths()
	paths.Register(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	name, addr, ok := "", "", len(rest) == 1
	if ok {
		name, addr, ok = strings.Cut(rest[0], "=")
	}
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("cluster member add takes one NAME=ADDRESS, like h4=10.0.0.14 (the host's address; its member listens on the fleet's --cluster-peer-port)")
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	ms, err := c.AddFleetMember(ctx, api.AddFleetMember{Name: name, Address: addr})
	if err != nil {
		return err
	}
	var peers []string
	for _, m := range ms {
		host := m.PeerURL
		if u, err := url.Parse(m.PeerURL); err == nil {
			host = u.Hostname()
		}
		peers = append(peers, m.Name+"="+host)
	}
	fmt.Fprintf(e.stdout, "the fleet's etcd expects %s: start it now with --cluster-host %s --cluster-join --cluster-peers %s (and the fleet's other --cluster-* flags)\n", name, name, strings.Join(peers, ","))
	return nil
}

func memberRemove(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "cluster member remove")
	paths := config.DefaultPaths()
	paths.Register(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("cluster member remove takes one member's name (hostd cluster member list)")
	}
	c, err := daemonClient(paths)
	if err != nil {
		return err
	}
	if err := c.RemoveFleetMember(ctx, rest[0]); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s is out of the fleet's etcd; stop its hostd if it still runs\n", rest[0])
	return nil
}

func printMembers(e *env, ms []api.FleetMember) error {
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tPEER URL\tCLIENT URL\tSTATE\t")
	for _, m := range ms {
		state := "joined"
		if !m.Started {
			state = "expected (added, its host not started)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", m.Name, m.PeerURL, m.ClientURL, state)
	}
	return w.Flush()
}
