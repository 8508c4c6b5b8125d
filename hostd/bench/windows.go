package bench

import (
	"context"
	"fmt"
	"image"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// windowSamples is the number of window lists and accessibility walks
// timed.
const windowSamples = 10

// windowsAndTree times the drive service's window list on the run's
// desktop, and a walk of the accessibility tree (the active window, nodes
// showing on the screen, default limits) on a browser desktop: each is
// one or two guest execs, so these are what an agent waits for.
func (e *env) windowsAndTree(ctx context.Context, svc *drive.Service, id string) error {
	var list Dist
	for range windowSamples {
		start := time.Now()
		if _, err := svc.Windows(ctx, id, image.Point{}); err != nil {
			return fmt.Errorf("windows: %w", err)
		}
		list.Add(time.Since(start))
	}
	e.res.dist("windows_list", &list)
	e.progress("  window list: p50 %s", list.Percentile(50))

	snap, ok, err := e.browserSnapshot("accessibility_walk_p50_ms")
	if !ok || err != nil {
		if err == nil {
			e.res.null("accessibility_nodes", "no browser snapshot (see accessibility_walk_p50_ms)")
		}
		return err
	}
	d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: snap.Name})
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	var walk Dist
	nodes := 0
	for range windowSamples {
		start := time.Now()
		tree, err := svc.Accessibility(ctx, d.ID, drive.AXOptions{})
		if err != nil {
			return fmt.Errorf("accessibility: %w", err)
		}
		walk.Add(time.Since(start))
		nodes = tree.Nodes
	}
	e.res.dist("accessibility_walk", &walk)
	e.res.set("accessibility_nodes", float64(nodes))
	e.progress("  accessibility walk of the focused window (%d nodes): p50 %s", nodes, walk.Percentile(50))
	return nil
}
