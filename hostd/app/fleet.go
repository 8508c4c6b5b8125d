package app

import (
	"context"
	"log/slog"
	"slices"

	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/web"
)

// openNode makes this host one of the fleet cfg.Cluster names, token its
// own daemon token (the fleet's, if it is the first host).
func openNode(ctx context.Context, cfg config.Serve, token string, log *slog.Logger) (*fleet.Node, error) {
	if err := store.RefuseFleet(cfg.Records()); err != nil {
		return nil, err
	}
	nc := cfg.Cluster.Node(cfg.StateDir, cfg.TokenFile())
	nc.Logger = log
	return fleet.Open(ctx, nc, token)
}

// wireFleet gives web the node's hooks, which stay nil on a single host.
func wireFleet(c *web.Config, n *fleet.Node, host string) {
	c.Fleet, c.Locate, c.Place, c.Drain, c.HostName, c.Members, c.Moves, c.MoveTarget = n.Status, n.Locate, n.Place, n.Drain, host, n, n.Moves(), n.MoveTarget
	c.EnsureSnapshot, c.Peers, c.PullEvents, c.RotateToken, c.PeerTLS = n.EnsureSnapshot, n.Peers, n.PullEvents, n.RotateToken, n.PeerTLS().Client
	c.Others = func(ctx context.Context) ([]web.RemoteDesktop, error) {
		all, err := n.Others(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]web.RemoteDesktop, 0, len(all))
		for _, d := range all {
			out = append(out, web.RemoteDesktop(d))
		}
		return out, nil
	}
}

// imageBuilt says whether the image of that hash is built in cacheDir: a
// snapshot pulled from another host layers its disk on it.
func imageBuilt(cacheDir string) func(hash string) bool {
	return func(hash string) bool {
		ims, _ := images.List(cacheDir)
		return slices.ContainsFunc(ims, func(im images.Image) bool { return im.Hash == hash })
	}
}
