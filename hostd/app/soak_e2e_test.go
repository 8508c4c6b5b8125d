package app_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// TestSoakOnQEMU runs 5 agents on 5 QEMU desktops of the whole stack (pool,
// Manager, drive service, HTTP server) for WARMDESK_SOAK: batches with
// settled screenshots, screenshots, commands, and one agent deleting and
// creating its desktop anew. No request may fail; at the end no desktop,
// QEMU process, goroutine or descriptor is left beyond what was there.
func TestSoakOnQEMU(t *testing.T) {
	dur := testenv.SoakDuration(t)
	s := startStackWith(t, "minimal", 2)
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	baseGoroutines, baseFDs := runtime.NumGoroutine(), testenv.OpenFDs(t)
	ids := []string{s.id}
	for len(ids) < 5 {
		d, err := s.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: s.snap})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	var ops, failures atomic.Int64
	var mu sync.Mutex
	var errs, gone []string
	fail := func(what string, err error) {
		failures.Add(1)
		mu.Lock()
		if len(errs) < 5 {
			errs = append(errs, what+": "+err.Error())
		}
		mu.Unlock()
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for agent := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ids[agent]
			for round := 0; time.Now().Before(deadline); round++ {
				ops.Add(3)
				batch := input.Batch{{Kind: input.KindMove, At: &input.Point{X: 100 + 10*agent, Y: 100 + round%50}}, {Kind: input.KindClick, At: &input.Point{X: 640, Y: 400}}}
				if _, err := s.c.Actions(ctx, id, api.ActionsRequest{Actions: batch, Screenshot: true}); err != nil {
					fail("actions", err)
				}
				if _, _, err := s.c.Screenshot(ctx, id, nil, false); err != nil {
					fail("screenshot", err)
				}
				res, err := s.c.Exec(ctx, id, api.ExecRequest{Shell: fmt.Sprintf("echo %d-%d", agent, round)})
				if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != fmt.Sprintf("%d-%d", agent, round) {
					fail("exec", fmt.Errorf("%+v, %v", res, err))
				}
				if agent == 0 && round%5 == 4 {
					// The churning agent: its desktop goes, a new one comes
					// from the pool.
					ops.Add(2)
					if err := s.c.DeleteDesktop(ctx, id); err != nil {
						fail("delete", err)
					}
					d, err := s.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: s.snap})
					if err != nil {
						fail("create", err)
						return
					}
					mu.Lock()
					gone = append(gone, id)
					ids[agent] = d.ID
					mu.Unlock()
					id = d.ID
				}
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed; the first: %s", n, ops.Load(), strings.Join(errs, "\n"))
	}
	for _, id := range ids {
		if err := s.c.DeleteDesktop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	s.id = ids[0]
	if left := s.drv.PoolSize(s.snap); left > 2 {
		t.Errorf("pool holds %d machines, more than its size 2", left)
	}
	// Only the pool's QEMU processes may remain: none named after a
	// desktop.
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), "qemu-system") {
			for _, id := range append(ids, gone...) {
				if strings.Contains(string(cmdline), "guest="+id+",") {
					t.Errorf("QEMU %s of deleted desktop %s still runs", p.Name(), id)
				}
			}
		}
	}
	var goroutines, fds int
	settled := testenv.Poll(time.Minute, 10*time.Millisecond, time.Second, func() bool {
		goroutines, fds = runtime.NumGoroutine(), testenv.OpenFDs(t)
		return goroutines <= baseGoroutines+10 && fds <= baseFDs+10
	})
	t.Logf("5 agents on QEMU, %s: %d requests, none failed; goroutines %d before, %d after; descriptors %d before, %d after",
		dur, ops.Load(), baseGoroutines, goroutines, baseFDs, fds)
	if !settled {
		buf := make([]byte, 1<<20)
		t.Fatalf("leaked: goroutines %d (before %d), descriptors %d (before %d)\n%s", goroutines, baseGoroutines, fds, baseFDs, buf[:runtime.Stack(buf, true)])
	}
}
