package bench

import (
	"context"
	"time"
)

func (e *env) forkSuite(ctx context.Context) error {
	src, _, _, err := e.liveDesktop(ctx)
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), src.ID)
	for _, n := range e.opts.ForkSizes {
		start := time.Now()
		copies, err := e.mgr.Lineage().Fork(ctx, src.ID, n)
		took := time.Since(start)
		if err != nil {
			return err
		}
		key := "fork" + itoa(n)
		e.res.set(key+"_total_ms", ms(took))
		e.res.set(key+"_per_copy_ms", ms(took/time.Duration(n)))
		e.progress("  fork %d: %s", n, took.Round(time.Millisecond))
		for _, c := range copies {
			e.mgr.Delete(context.WithoutCancel(ctx), c.ID)
		}
	}
	return nil
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
