package bench

import (
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/vnc"
)

// createTimeout bounds one create; a cold boot under TCG takes a minute.
const createTimeout = 3 * time.Minute

// timeCreate measures one Manager create up to a non-blank first frame of
// the desktop's screen mirror, then deletes the desktop (not timed).
func (e *env) timeCreate(ctx context.Context, mgr *desktop.Manager, screens *drive.Mirrors) (time.Duration, error) {
	return timeCreateOn(ctx, mgr, screens, desktop.CreateRequest{Snapshot: e.snap.Name})
}

// timeCreateWith is timeCreate of a request on the run's Manager.
func (e *env) timeCreateWith(ctx context.Context, req desktop.CreateRequest) (time.Duration, error) {
	return timeCreateOn(ctx, e.mgr, e.screens, req)
}

func timeCreateOn(ctx context.Context, mgr *desktop.Manager, screens *drive.Mirrors, req desktop.CreateRequest) (time.Duration, error) {
	took, _, err := timeCreatePhases(ctx, mgr, screens, req)
	return took, err
}

// timeCreatePhases is timeCreateOn that also says where the time went: the
// steps the Manager and the driver marked, then the first frame.
func timeCreatePhases(ctx context.Context, mgr *desktop.Manager, screens *drive.Mirrors, req desktop.CreateRequest) (time.Duration, []desktop.PhaseMark, error) {
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	phases := desktop.NewPhases()
	start := time.Now()
	d, err := mgr.Create(desktop.WithPhases(ctx, phases), req)
	if err != nil {
		return 0, nil, err
	}
	defer mgr.Delete(context.WithoutCancel(ctx), d.ID)
	scr, ok := screens.Get(d.ID)
	if !ok {
		return 0, nil, fmt.Errorf("desktop %s has no screen", d.ID)
	}
	if err := waitNonBlank(ctx, scr.Mirror); err != nil {
		return 0, nil, err
	}
	took := time.Since(start)
	phases.Mark("first_frame")
	return took, phases.Marks(), nil
}

// phaseDists gathers each create step's durations over many creates, in
// the order the steps first came.
type phaseDists struct {
	order []string
	dists map[string]*Dist
}

// add takes one create's marks; a step marked twice (a restore tried
// again) counts once, with both times.
func (p *phaseDists) add(marks []desktop.PhaseMark) {
	if p.dists == nil {
		p.dists = map[string]*Dist{}
	}
	took := map[string]time.Duration{}
	var names []string
	for _, m := range marks {
		if _, seen := took[m.Name]; !seen {
			names = append(names, m.Name)
		}
		took[m.Name] += m.Took
	}
	for _, name := range names {
		d, ok := p.dists[name]
		if !ok {
			d = &Dist{}
			p.dists[name] = d
			p.order = append(p.order, name)
		}
		d.Add(took[name])
	}
}

// report sets PREFIX_phase_STEP_p50_ms for each step and says them in
// order.
func (p *phaseDists) report(e *env, prefix string) {
	var parts []string
	for _, name := range p.order {
		p50 := p.dists[name].Percentile(50)
		e.res.set(prefix+"_phase_"+name+"_p50_ms", ms(p50))
		parts = append(parts, fmt.Sprintf("%s %.1f ms", name, ms(p50)))
	}
	e.progress("  %s phases (p50 each): %s", prefix, strings.Join(parts, ", "))
}

func (e *env) createSuite(ctx context.Context) error {
	n := e.opts.N
	// A machine the warm pool restored (copy-on-write) and warmed ahead.
	// Machines the warm pool restored (copy-on-write) and warmed ahead,
	// their screens painted ahead (as hostd serves them) and, the
	// baseline, not; in alternating blocks, painted first, so the run's
	// first creates (its coldest caches) do not fall to the baseline.
	var pool, coldMirror Dist
	var poolPhases, coldMirrorPhases phaseDists
	for block := range 4 {
		prewarm := block%2 == 0
		if block > 0 {
			// The refill after the last create was warmed the old way.
			if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
				return err
			}
			e.drv.Warm(e.snap, 0)
		}
		e.screens.SetPrewarm(prewarm)
		e.drv.Warm(e.snap, 1)
		into, phases := &coldMirror, &coldMirrorPhases
		if prewarm {
			into, phases = &pool, &poolPhases
		}
		for i := 0; i < max(n/2, 1); i++ {
			if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
				return err
			}
			d, marks, err := timeCreatePhases(ctx, e.mgr, e.screens, desktop.CreateRequest{Snapshot: e.snap.Name})
			if err != nil {
				return fmt.Errorf("create from the pool: %w", err)
			}
			into.Add(d)
			phases.add(marks)
		}
	}
	e.drv.Warm(e.snap, 0)
	e.screens.SetPrewarm(true)
	e.res.dist("create_pool", &pool)
	e.res.dist("create_pool_cold_mirror", &coldMirror)
	if p := coldMirror.Percentile(50); p > 0 {
		e.res.set("create_pool_over_cold_mirror_ratio", float64(pool.Percentile(50))/float64(p))
	}
	e.progress("  warm pool: p50 %s; with the mirror connected at the create (the baseline) %s", pool.Percentile(50), coldMirror.Percentile(50))
	poolPhases.report(e, "create_pool")
	coldMirrorPhases.report(e, "create_pool_cold_mirror")

	if err := e.resetBeside(ctx, n); err != nil {
		return fmt.Errorf("resets beside creates: %w", err)
	}

	// Copy-on-write restore, spawning QEMU on the create.
	var nopool Dist
	var nopoolPhases phaseDists
	for i := 0; i < n; i++ {
		d, marks, err := timeCreatePhases(ctx, e.mgr, e.screens, desktop.CreateRequest{Snapshot: e.snap.Name})
		if err != nil {
			return fmt.Errorf("create without pool: %w", err)
		}
		nopool.Add(d)
		nopoolPhases.add(marks)
	}
	e.res.dist("create_nopool", &nopool)
	e.progress("  no pool: p50 %s", nopool.Percentile(50))
	nopoolPhases.report(e, "create_nopool")

	// Full-state restore: all RAM in the state file, anonymous memory.
	full, err := e.fullRestores(ctx, n)
	if err != nil {
		return fmt.Errorf("full-state restore: %w", err)
	}
	e.res.dist("create_fullrestore", full)
	e.progress("  full-state restore: p50 %s", full.Percentile(50))

	if err := e.compareCreates(ctx, n); err != nil {
		return fmt.Errorf("creates of %s beside %s: %w", e.opts.CompareSnapshot, e.snap.Name, err)
	}

	// The libvirt driver's restore, when libvirtd is there.
	if err := e.libvirtCreates(ctx, n); err != nil {
		for _, k := range []string{"create_libvirt_p50_ms", "create_libvirt_p95_ms", "create_libvirt_max_ms"} {
			e.res.null(k, "libvirt driver not measured: "+err.Error())
		}
	}

	// Cold boot to ready, the floor to beat.
	var cold Dist
	im, err := images.Find(e.opts.Paths.CacheDir, e.snap.Manifest.Image.Name)
	why := ""
	switch {
	case e.opts.ColdN <= 0:
		why = "no cold boots asked for (--cold-n 0)"
	case err != nil || im.Hash != e.snap.Manifest.Image.Hash:
		why = "the snapshot's image is not in the cache, so it cannot be booted cold"
	}
	if why != "" {
		for _, k := range []string{"coldboot_p50_ms", "coldboot_p95_ms", "coldboot_max_ms", "coldboot_over_pool_ratio"} {
			e.res.null(k, why)
		}
		return nil
	}
	for i := 0; i < e.opts.ColdN; i++ {
		d, err := e.coldBoot(ctx, im)
		if err != nil {
			return fmt.Errorf("cold boot: %w", err)
		}
		cold.Add(d)
		e.progress("  cold boot %d: %s", i+1, d.Round(time.Millisecond))
	}
	e.res.dist("coldboot", &cold)
	if p := pool.Percentile(50); p > 0 {
		e.res.set("coldboot_over_pool_ratio", float64(cold.Percentile(50))/float64(p))
	}
	return nil
}

// resetBeside measures resets of one desktop to its snapshot beside
// warm-pool creates of the same snapshot, alternating sample by sample so
// the host's swings hit both alike: each until the desktop's mirror shows
// the new machine's screen. Both take a machine from the pool; a reset
// also ends the old one first.
func (e *env) resetBeside(ctx context.Context, n int) error {
	e.drv.Warm(e.snap, 1)
	defer e.drv.Warm(e.snap, 0)
	if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
		return err
	}
	d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: e.snap.Name})
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	scr, ok := e.screens.Get(d.ID)
	if !ok {
		return fmt.Errorf("desktop %s has no screen", d.ID)
	}
	if err := waitNonBlank(ctx, scr.Mirror); err != nil {
		return err
	}
	var create, reset Dist
	for i := 0; i < n; i++ {
		if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
			return err
		}
		c, err := e.timeCreate(ctx, e.mgr, e.screens)
		if err != nil {
			return err
		}
		create.Add(c)
		if err := e.drv.WaitPool(ctx, e.snap.Name, 1); err != nil {
			return err
		}
		r, err := e.timeReset(ctx, d.ID, scr.Mirror)
		if err != nil {
			return err
		}
		reset.Add(r)
	}
	e.res.dist("reset", &reset)
	e.res.dist("reset_create", &create)
	if p := create.Percentile(50); p > 0 {
		e.res.set("reset_over_create_ratio", float64(reset.Percentile(50))/float64(p))
	}
	e.progress("  reset: p50 %s beside warm-pool creates' %s", reset.Percentile(50), create.Percentile(50))
	return nil
}

// timeReset measures one reset up to the mirror's first picture of the
// new machine. The root window is painted red first (not timed), as a test
// case leaves its desktop changed, so the reset's picture is told from the
// old one by the root window's colour coming back.
func (e *env) timeReset(ctx context.Context, id string, mirror *vnc.Mirror) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	mach, _, err := e.mgr.Machine(ctx, id, desktop.WaitSetUp)
	if err != nil {
		return 0, err
	}
	res, err := desktop.Shell(ctx, mach.Agent(), "DISPLAY=:0 xsetroot -solid '#aa0000'", 30*time.Second)
	if err != nil || res.ExitCode != 0 {
		return 0, fmt.Errorf("paint the root window before a reset: %v %s", err, res.Stderr)
	}
	if err := waitCorner(ctx, mirror, true); err != nil {
		return 0, fmt.Errorf("the painted root window: %w", err)
	}
	start := time.Now()
	if _, err := e.mgr.Lineage().Reset(ctx, id, desktop.ResetRequest{}); err != nil {
		return 0, err
	}
	if err := waitCorner(ctx, mirror, false); err != nil {
		return 0, fmt.Errorf("the reset desktop's screen: %w", err)
	}
	return time.Since(start), nil
}

// waitCorner waits until the mirror's bottom right corner (the root window
// in every flavor) is, or is no longer, the red timeReset paints.
func waitCorner(ctx context.Context, mirror *vnc.Mirror, red bool) error {
	var buf *image.RGBA
	for {
		_, changed := mirror.Changed()
		var seq uint64
		buf, seq = mirror.Frame(buf)
		if seq > 0 && mirror.Connected() {
			b := buf.Bounds()
			c := buf.RGBAAt(b.Max.X-4, b.Max.Y-4)
			if (c.R == 0xaa && c.G == 0 && c.B == 0) == red {
				return nil
			}
		}
		mirror.Poke()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// compareKeys are the figures of compareCreates.
var compareKeys = []string{
	"create_compare_base_p50_ms", "create_compare_base_p95_ms", "create_compare_base_max_ms",
	"create_compare_p50_ms", "create_compare_p95_ms", "create_compare_max_ms", "create_compare_over_base_ratio",
}

// compareCreates measures warm-pool creates of a second snapshot beside
// the run's own, alternating sample by sample so the host's swings hit
// both alike; the ratio of their p50s is the figure to quote.
func (e *env) compareCreates(ctx context.Context, n int) error {
	if e.opts.CompareSnapshot == "" {
		for _, k := range compareKeys {
			e.res.null(k, "no second snapshot to compare (--compare-snapshot)")
		}
		return nil
	}
	other, err := e.cat.Get(e.opts.CompareSnapshot)
	if err != nil {
		return err
	}
	if err := e.cat.Verify(other); err != nil {
		return err
	}
	e.drv.Warm(e.snap, 1)
	e.drv.Warm(other, 1)
	defer e.drv.Warm(other, 0)
	defer e.drv.Warm(e.snap, 0)
	var base, cmp Dist
	for i := 0; i < n; i++ {
		for _, s := range []struct {
			snap desktop.Snapshot
			dist *Dist
		}{{e.snap, &base}, {other, &cmp}} {
			if err := e.drv.WaitPool(ctx, s.snap.Name, 1); err != nil {
				return err
			}
			d, err := e.timeCreateWith(ctx, desktop.CreateRequest{Snapshot: s.snap.Name})
			if err != nil {
				return err
			}
			s.dist.Add(d)
		}
	}
	e.res.dist("create_compare_base", &base)
	e.res.dist("create_compare", &cmp)
	if p := base.Percentile(50); p > 0 {
		e.res.set("create_compare_over_base_ratio", float64(cmp.Percentile(50))/float64(p))
	}
	e.res.note(fmt.Sprintf("create_compare: snapshot %s (%d MiB, image %s) against %s, warm pool, alternating", other.Name,
		other.Manifest.Machine.MemoryMiB, other.Manifest.Image.Name, e.snap.Name))
	e.progress("  %s beside %s (warm pool): p50 %s against %s", other.Name, e.snap.Name, cmp.Percentile(50), base.Percentile(50))
	return nil
}

// makeFullState writes one full state file from a clone of the snapshot.
func (e *env) makeFullState(ctx context.Context) (string, error) {
	m, err := e.drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("full-src-"), Snapshot: e.snap})
	if err != nil {
		return "", err
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	path := e.pathIn("full.state")
	saver, ok := m.(interface {
		SaveFullState(context.Context, string) error
	})
	if !ok {
		return "", fmt.Errorf("the driver cannot save full states")
	}
	if err := saver.SaveFullState(ctx, path); err != nil {
		return "", err
	}
	return path, nil
}

func (e *env) fullRestores(ctx context.Context, n int) (*Dist, error) {
	path, err := e.makeFullState(ctx)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	if info, err := os.Stat(path); err == nil {
		e.res.set("fullrestore_state_mb", float64(info.Size())/(1<<20))
	}
	var d Dist
	for i := 0; i < n; i++ {
		took, err := func() (time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, createTimeout)
			defer cancel()
			start := time.Now()
			m, err := e.drv.RestoreFullState(ctx, desktop.NewID("full-"), e.snap, path)
			if err != nil {
				return 0, err
			}
			defer m.Destroy(context.WithoutCancel(ctx))
			if err := waitNonBlank(ctx, mirrorOf(ctx, m, e.log)); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}()
		if err != nil {
			return nil, err
		}
		d.Add(took)
	}
	return &d, nil
}

// libvirtEnv builds a libvirt driver and a Manager on it, or says why not.
func (e *env) libvirtEnv(ctx context.Context) (desktop.Driver, *desktop.Manager, *drive.Mirrors, func(), error) {
	cfg := config.DefaultServe()
	cfg.Driver = "libvirt"
	cfg.LibvirtURI = e.opts.LibvirtURI
	cfg.Paths = config.Paths{StateDir: e.pathIn("libvirt"), CacheDir: e.opts.Paths.CacheDir, RunDir: e.runDir + "/lv"}
	// 0711: the desktops' QEMU processes, each as its own user, pass
	// through to their own files.
	for _, d := range []string{cfg.Desktops(), cfg.RunDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	screens := drive.NewMirrors(context.WithoutCancel(ctx), e.log)
	drv, err := app.NewDriver(ctx, cfg, screens, nil, e.log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	records, err := store.Open(filepath.Join(cfg.StateDir, "records.db"))
	if err != nil {
		if c, ok := drv.(app.Closer); ok {
			c.Close()
		}
		return nil, nil, nil, nil, err
	}
	limits := desktop.DefaultLimits()
	limits.MaxDesktops, limits.MaxMemoryMiB, limits.PoolSize = 64, 1<<20, 0
	mgr := desktop.NewManager(ctx, desktop.Config{Driver: drv, Store: records, Catalog: e.cat, Logger: e.log, Limits: limits, Observer: screens})
	done := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, d := range mgr.List() {
			mgr.Delete(cctx, d.ID)
		}
		mgr.Close()
		if c, ok := drv.(app.Closer); ok {
			c.Close()
		}
		records.Close()
	}
	return drv, mgr, screens, done, nil
}

func (e *env) libvirtCreates(ctx context.Context, n int) error {
	_, mgr, screens, done, err := e.libvirtEnv(ctx)
	if err != nil {
		return err
	}
	defer done()
	var d Dist
	for i := 0; i < n; i++ {
		took, err := e.timeCreate(ctx, mgr, screens)
		if err != nil {
			return err
		}
		d.Add(took)
	}
	e.res.dist("create_libvirt", &d)
	e.progress("  libvirt: p50 %s", d.Percentile(50))
	return nil
}

// coldBoot boots the image from scratch to the guest's ready line.
func (e *env) coldBoot(ctx context.Context, im images.Image) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, images.DefaultReadyTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(e.dataDir, "cold-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	ready := make(chan struct{}, 1)
	start := time.Now()
	m, err := e.drv.Boot(ctx, desktop.BootSpec{
		Name: "coldboot", Image: im.Boot(), CPUs: e.snap.Manifest.Machine.CPUs, MemoryMiB: e.snap.Manifest.Machine.MemoryMiB, Dir: dir,
		ConsoleLine: func(line string) {
			if strings.Contains(line, "warmdesk: ready") {
				select {
				case ready <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		return 0, err
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	select {
	case <-ready:
		return time.Since(start), nil
	case <-m.Exited():
		return 0, fmt.Errorf("QEMU %s", m.ExitReason())
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
