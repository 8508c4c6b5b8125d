package bench

import (
	"context"
	"fmt"
	"image"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// windowSamples is the number of window lists, moves and focuses, and of
// accessibility walks, timed.
const windowSamples = 20

// windowsSuite times the window API through the drive service on a desktop
// of the run's snapshot (one xterm on minimal): what an agent waits for
// when it lists the windows at every step, moves one or focuses one.
//
//   - windows_list: the list;
//   - windows_move: a move of the first window, between two corners;
//   - windows_focus: focusing it;
//   - windows_failed: calls that failed (a guest too slow to answer within
//     the helper's bound); their time counts in their distribution, as an
//     agent waited for it, and the first error is in the notes.
func (e *env) windowsSuite(ctx context.Context) error {
	d, _, _, err := e.liveDesktop(ctx)
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	if err != nil {
		return err
	}
	svc := drive.New(ctx, drive.Config{Manager: e.mgr, Screens: e.screens, Logger: e.log})
	var list, move, focus Dist
	failed := 0
	timed := func(dist *Dist, what string, call func() error) {
		start := time.Now()
		err := call()
		dist.Add(time.Since(start))
		if err != nil {
			if failed == 0 {
				e.res.note(fmt.Sprintf("windows_failed: the first failure, a %s: %v", what, err))
			}
			failed++
		}
	}
	var wins []drive.Window
	for range windowSamples {
		timed(&list, "list", func() error {
			got, err := svc.Windows(ctx, d.ID, image.Point{})
			if len(got) > 0 {
				wins = got
			}
			return err
		})
	}
	if len(wins) == 0 {
		return fmt.Errorf("windows: the desktop of %s lists no window to move", e.snap.Name)
	}
	id := wins[0].ID
	for i := range windowSamples {
		x, y := 100+(i%2)*200, 80+(i%2)*100
		timed(&move, "move", func() error {
			w, err := svc.PlaceWindow(ctx, d.ID, id, drive.Placement{X: &x, Y: &y}, image.Point{})
			if err == nil && (w.X != x || w.Y != y) {
				e.res.note(fmt.Sprintf("windows_move: asked for %d,%d, the window went to %d,%d", x, y, w.X, w.Y))
			}
			return err
		})
		timed(&focus, "focus", func() error {
			_, err := svc.FocusWindow(ctx, d.ID, id, image.Point{})
			return err
		})
	}
	e.res.dist("windows_list", &list)
	e.res.dist("windows_move", &move)
	e.res.dist("windows_focus", &focus)
	e.res.set("windows_failed", float64(failed))
	e.progress("  window list: p50 %s, move: p50 %s, focus: p50 %s, %d failed", list.Percentile(50), move.Percentile(50), focus.Percentile(50), failed)
	return nil
}

// accessibilityWalk times a walk of the accessibility tree (the active
// window, nodes showing on the screen, default limits) on a browser
// desktop: one guest exec of python3.
func (e *env) accessibilityWalk(ctx context.Context, svc *drive.Service) error {
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
	for range windowSamples / 2 {
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
