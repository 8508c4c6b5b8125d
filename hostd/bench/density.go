package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
)

// idleQuiet is how long every desktop's screen must stay still before
// memory is read: "idle".
const idleQuiet = 2 * time.Second

func (e *env) densitySuite(ctx context.Context) error {
	k := e.opts.K
	cow, err := e.densityCoW(ctx, k)
	if err != nil {
		return fmt.Errorf("copy-on-write clones: %w", err)
	}
	e.res.set("pss_per_desktop_mb_cow", cow)
	e.progress("  %d copy-on-write clones: %.1f MB PSS each", k, cow)
	full, err := e.densityFull(ctx, k)
	if err != nil {
		return fmt.Errorf("full restores: %w", err)
	}
	e.res.set("pss_per_desktop_mb_full", full)
	e.progress("  %d full restores: %.1f MB PSS each", k, full)
	if lv, err := e.densityLibvirt(ctx, k); err != nil {
		e.res.null("pss_per_desktop_mb_libvirt", "libvirt driver not measured: "+err.Error())
	} else {
		e.res.set("pss_per_desktop_mb_libvirt", lv)
		e.progress("  %d libvirt desktops: %.1f MB PSS each", k, lv)
	}
	budget := float64(e.opts.BudgetMiB)
	e.res.set("budget_mib", budget)
	for key, per := range map[string]float64{"cow": cow, "full": full} {
		if per > 0 {
			e.res.set("max_desktops_in_budget_"+key, float64(int(budget*(1<<20)/(per*1e6))))
		}
	}
	if v := e.res.Keys["pss_per_desktop_mb_libvirt"]; v != nil && *v > 0 {
		e.res.set("max_desktops_in_budget_libvirt", float64(int(budget*(1<<20)/(*v*1e6))))
	}
	return nil
}

// settleAll waits until every source has been still for idleQuiet.
func settleAll(ctx context.Context, srcs []screenshot.Source) {
	var wg sync.WaitGroup
	for _, s := range srcs {
		wg.Add(1)
		go func() { defer wg.Done(); screenshot.WaitSettled(ctx, s, idleQuiet, time.Minute) }()
	}
	wg.Wait()
}

// pssMB sums the PSS of machines' processes and divides by their number,
// in MB (10^6 bytes).
func pssMB(ms []desktop.Machine) (float64, error) {
	var total int64
	for _, m := range ms {
		v, err := processPSS(m.Pid())
		if err != nil {
			return 0, err
		}
		total += v
	}
	return float64(total) / float64(len(ms)) / 1e6, nil
}

func (e *env) densityCoW(ctx context.Context, k int) (float64, error) {
	var ms []desktop.Machine
	var srcs []screenshot.Source
	var ids []string
	defer func() {
		for _, id := range ids {
			e.mgr.Delete(context.WithoutCancel(ctx), id)
		}
	}()
	for i := 0; i < k; i++ {
		d, m, _, err := e.liveDesktop(ctx)
		if d.ID != "" {
			ids = append(ids, d.ID)
		}
		if err != nil {
			return 0, err
		}
		scr, _ := e.screens.Get(d.ID)
		ms, srcs = append(ms, m), append(srcs, scr.Mirror)
	}
	settleAll(ctx, srcs)
	if err := e.pssBreakdown(ms); err != nil {
		return 0, err
	}
	return pssMB(ms)
}

// pssBreakdown sets pss_cow_PART_mb: what an idle clone's memory holds, on
// average over ms.
func (e *env) pssBreakdown(ms []desktop.Machine) error {
	// The kernel names a mapping by its file's real path.
	memory, err := filepath.EvalSymlinks(e.snap.Path(desktop.FileMemory))
	if err != nil {
		return err
	}
	var sum pssParts
	for _, m := range ms {
		p, err := processPSSParts(m.Pid(), memory)
		if err != nil {
			return err
		}
		sum.GuestShared += p.GuestShared
		sum.GuestDirtied += p.GuestDirtied
		sum.TCG += p.TCG
		sum.Anon += p.Anon
		sum.Files += p.Files
	}
	mb := func(kb int64) float64 { return float64(kb) * 1024 / float64(len(ms)) / 1e6 }
	for key, kb := range map[string]int64{
		"guest_shared": sum.GuestShared, "guest_dirtied": sum.GuestDirtied, "tcg": sum.TCG, "anon": sum.Anon, "files": sum.Files,
	} {
		e.res.set("pss_cow_"+key+"_mb", mb(kb))
	}
	e.progress("  an idle clone's PSS: guest RAM shared %.1f MB, dirtied since the restore %.1f MB, TCG's translation cache %.1f MB, QEMU's other memory %.1f MB, binary and libraries %.1f MB",
		mb(sum.GuestShared), mb(sum.GuestDirtied), mb(sum.TCG), mb(sum.Anon), mb(sum.Files))
	return nil
}

func (e *env) densityFull(ctx context.Context, k int) (float64, error) {
	path, err := e.makeFullState(ctx)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	var ms []desktop.Machine
	var srcs []screenshot.Source
	defer func() {
		for _, m := range ms {
			m.Destroy(context.WithoutCancel(ctx))
		}
	}()
	for i := 0; i < k; i++ {
		m, err := e.drv.RestoreFullState(ctx, desktop.NewID("dens-"), e.snap, path)
		if err != nil {
			return 0, err
		}
		ms = append(ms, m)
		mr := mirrorOf(ctx, m, e.log)
		if err := waitNonBlank(ctx, mr); err != nil {
			return 0, err
		}
		srcs = append(srcs, mr)
	}
	settleAll(ctx, srcs)
	return pssMB(ms)
}

func (e *env) densityLibvirt(ctx context.Context, k int) (float64, error) {
	_, mgr, screens, done, err := e.libvirtEnv(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var ms []desktop.Machine
	var srcs []screenshot.Source
	for i := 0; i < k; i++ {
		d, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: e.snap.Name})
		if err != nil {
			return 0, err
		}
		m, _, err := mgr.Machine(ctx, d.ID, desktop.WaitNone)
		if err != nil {
			return 0, err
		}
		scr, _ := screens.Get(d.ID)
		if err := waitNonBlank(ctx, scr.Mirror); err != nil {
			return 0, err
		}
		ms, srcs = append(ms, m), append(srcs, scr.Mirror)
	}
	settleAll(ctx, srcs)
	return pssMB(ms)
}
