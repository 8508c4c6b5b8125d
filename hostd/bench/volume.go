package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/volume"
)

// volumeKeys are the volume suite's figures.
var volumeKeys = []string{
	"create_novolume_p50_ms", "create_novolume_p95_ms", "create_novolume_max_ms",
	"create_volume_p50_ms", "create_volume_p95_ms", "create_volume_max_ms",
	"volume_attach_added_p50_ms", "attach_running_p50_ms", "attach_running_p95_ms", "attach_running_max_ms",
	"fork3_novolume_p50_ms", "fork3_volume_p50_ms", "fork3_volume_over_novolume_ratio",
}

// volumeSuite measures warm-pool creates with one volume attached and
// mounted beside creates without, alternating sample by sample so the
// host's swings hit both alike; then the attach to a running desktop
// alone (hot-plug and mount).
func (e *env) volumeSuite(ctx context.Context) error {
	if e.mgr.Volumes().Registry() == nil {
		for _, k := range volumeKeys {
			e.res.null(k, "volumes not available: "+e.volErr)
		}
		return nil
	}
	reg := e.mgr.Volumes().Registry()
	name := "bench-ws"
	if _, err := reg.Create(ctx, volume.CreateRequest{Name: name, SizeMiB: 256}); err != nil {
		return err
	}
	defer reg.Remove(name)
	e.drv.Warm(e.snap, 1)
	defer e.drv.Warm(e.snap, 0)
	var without, with Dist
	var phases phaseDists
	for i := 0; i < e.opts.N; i++ {
		for _, s := range []struct {
			dist *Dist
			vols []volume.Mount
		}{{&without, nil}, {&with, []volume.Mount{{Name: name, Mount: "/workspace"}}}} {
			if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
				return err
			}
			d, marks, err := timeCreatePhases(ctx, e.mgr, e.screens, desktop.CreateRequest{Snapshot: e.snap.Name, Volumes: s.vols})
			if err != nil {
				return fmt.Errorf("create with %d volumes: %w", len(s.vols), err)
			}
			s.dist.Add(d)
			if len(s.vols) > 0 {
				phases.add(marks)
			}
		}
	}
	e.res.dist("create_novolume", &without)
	e.res.dist("create_volume", &with)
	e.res.set("volume_attach_added_p50_ms", ms(with.Percentile(50)-without.Percentile(50)))
	e.progress("  create with a volume: p50 %s against %s without", with.Percentile(50), without.Percentile(50))
	// The attach's own steps: the host's hot-plug, the guest showing
	// the disk (its kernel and udev), the mount.
	phases.report(e, "create_volume")

	// Attach to a running desktop: hot-plug, the guest finds the disk,
	// mounts it; then detach (not timed).
	src, _, _, err := e.liveDesktop(ctx)
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), src.ID)
	var attach Dist
	for i := 0; i < e.opts.N; i++ {
		start := time.Now()
		if _, err := e.mgr.Volumes().Attach(ctx, src.ID, volume.Mount{Name: name, Mount: "/workspace"}); err != nil {
			return fmt.Errorf("attach to a running desktop: %w", err)
		}
		attach.Add(time.Since(start))
		if _, err := e.mgr.Volumes().Detach(ctx, src.ID, name); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
	}
	e.res.dist("attach_running", &attach)
	e.progress("  attach to a running desktop: p50 %s", attach.Percentile(50))
	return e.forkWithVolume(ctx, src.ID, name)
}

// forkWithVolume measures fork x3 of a desktop holding a read-write
// volume (each copy gets its own branch) beside fork x3 of the same
// desktop without it, alternating.
func (e *env) forkWithVolume(ctx context.Context, id, name string) error {
	rounds := max(1, min(e.opts.N/5, 3))
	var without, with Dist
	for range rounds {
		for _, attached := range []bool{false, true} {
			if attached {
				if _, err := e.mgr.Volumes().Attach(ctx, id, volume.Mount{Name: name, Mount: "/workspace"}); err != nil {
					return err
				}
			}
			start := time.Now()
			copies, err := e.mgr.Lineage().Fork(ctx, id, 3)
			took := time.Since(start)
			if err != nil {
				return fmt.Errorf("fork x3 (volume %v): %w", attached, err)
			}
			for _, c := range copies {
				e.mgr.Delete(context.WithoutCancel(ctx), c.ID)
				for _, v := range c.Volumes {
					e.mgr.Volumes().Remove(v.Name)
				}
			}
			if attached {
				with.Add(took)
				if _, err := e.mgr.Volumes().Detach(ctx, id, name); err != nil {
					return err
				}
			} else {
				without.Add(took)
			}
		}
	}
	e.res.set("fork3_novolume_p50_ms", ms(without.Percentile(50)))
	e.res.set("fork3_volume_p50_ms", ms(with.Percentile(50)))
	if p := without.Percentile(50); p > 0 {
		e.res.set("fork3_volume_over_novolume_ratio", float64(with.Percentile(50))/float64(p))
	}
	e.progress("  fork x3 with a volume: p50 %s against %s without", with.Percentile(50), without.Percentile(50))
	return nil
}
