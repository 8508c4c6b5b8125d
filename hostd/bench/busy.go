package bench

import (
	"context"
	"fmt"
	"image"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/settle"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/input"
)

// BusyOptions configure the busy suite: agent loops on browser desktops
// while the host's CPUs are contended.
type BusyOptions struct {
	// N are the numbers of desktops running a loop at once, a phase each
	// (default 1, 2, 4, 8).
	N []int
	// For is how long each phase's loops run (default 2m); Steps, when
	// set, runs each loop that many steps instead.
	For   time.Duration
	Steps int
	// Hogs, when set, adds a phase: one loop beside this many minimal
	// desktops that spin every virtual CPU.
	Hogs int
	// BakeBeside, when set, adds a phase: this many loops while the
	// snapshot's image is baked beside them, then as many steps again
	// without the bake, on the same desktops.
	BakeBeside int
}

// DefaultBusy is the busy suite's default run.
func DefaultBusy() BusyOptions {
	return BusyOptions{N: []int{1, 2, 4, 8}, For: 2 * time.Minute, BakeBeside: 4}
}

// busyWithoutSteps bounds the steps each loop runs after the bake, for
// the comparison.
const busyWithoutSteps = 20

// busyTitleWithin bounds the wait for a step's word to come back in the
// page's title before it counts as lost.
const busyTitleWithin = 30 * time.Second

// busySuite runs agent loops as an agent would: click the start page's
// field, select what it holds, type a word, click Go, with a settled
// picture in the same batch; then read the page's title back. Per phase:
// steps, step time (the batch's round trip), errors, words lost (never
// read back) or late (not yet there when the settled picture came back),
// pictures marked not settled and how many of those were true (the screen
// changed after the picture), and the host's CPU pressure and admission
// counts. In a timed phase one create is tried midway, to show what
// admission does to a newcomer on a busy host.
func (e *env) busySuite(ctx context.Context) error {
	o := e.opts.Busy
	snap, ok, err := e.browserSnapshot("busy_n1_step_p50_ms")
	if !ok || err != nil {
		return err
	}
	srv, c := e.serve(ctx)
	defer srv.Close()
	var phases []busyPhase
	for _, n := range o.N {
		phases = append(phases, busyPhase{key: fmt.Sprintf("busy_n%d", n), loops: n})
	}
	if o.Hogs > 0 {
		phases = append(phases, busyPhase{key: fmt.Sprintf("busy_hogs%d", o.Hogs), loops: 1, hogs: o.Hogs})
	}
	if o.BakeBeside > 0 {
		phases = append(phases, busyPhase{key: fmt.Sprintf("busy_n%d_bake", o.BakeBeside), loops: o.BakeBeside, bake: true})
	}
	for _, p := range phases {
		if err := e.busyPhase(ctx, c, snap, p); err != nil {
			return fmt.Errorf("%s: %w", p.key, err)
		}
		e.cleanupDesktops()
	}
	e.busyRatios(o)
	return nil
}

type busyPhase struct {
	key   string
	loops int
	hogs  int
	bake  bool
}

// busyRatios sets the suite's goals as ratios of its own phases.
func (e *env) busyRatios(o BusyOptions) {
	ratio := func(key, over, under string) {
		a, b := e.res.Keys[over], e.res.Keys[under]
		if a != nil && b != nil && *b > 0 {
			e.res.set(key, *a / *b)
		}
	}
	ratio("busy_p95_n4_over_n1", "busy_n4_step_p95_ms", "busy_n1_step_p95_ms")
	if o.BakeBeside > 0 {
		p := fmt.Sprintf("busy_n%d_bake", o.BakeBeside)
		ratio("busy_p95_bake_over_without", p+"_with_step_p95_ms", p+"_without_step_p95_ms")
	}
}

func (e *env) busyPhase(ctx context.Context, c *client.Client, snap desktop.Snapshot, p busyPhase) error {
	o := e.opts.Busy
	e.progress("  %s: %d loop(s), %d hog(s), bake beside: %v", p.key, p.loops, p.hogs, p.bake)
	// Every desktop is made before any load starts, each once the host is
	// under the admission bound (the previous phase's load fades first).
	create := func(name string) (string, error) {
		if err := e.cpu.WaitIdle(ctx); err != nil {
			return "", err
		}
		d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: name})
		return d.ID, err
	}
	var ids, hogs []string
	for range p.loops {
		id, err := create(snap.Name)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for range p.hogs {
		id, err := create(e.snap.Name)
		if err != nil {
			return err
		}
		hogs = append(hogs, id)
	}
	field, goButton, _, _, err := e.startPageForm(ctx, ids[0])
	if err != nil {
		return err
	}
	for _, id := range hogs {
		if err := spin(ctx, c, id); err != nil {
			return err
		}
	}
	before := e.cpu.Status()
	if !p.bake {
		e.busyResult(p.key, e.runLoops(ctx, c, ids, field, goButton, o.For, o.Steps, nil))
	} else {
		baked := make(chan struct{})
		var bakeErr error
		var bakeTook time.Duration
		go func() {
			defer close(baked)
			start := time.Now()
			bakeErr = e.bakeBeside(ctx)
			bakeTook = time.Since(start)
		}()
		with := e.runLoops(ctx, c, ids, field, goButton, 0, 0, baked)
		<-baked // also when the loops ended for ctx: the bake goes first
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A bake that failed (one starved past its ready timeout, say) is
		// a finding of the run, not the end of it.
		if bakeErr != nil {
			e.res.null(p.key+"_s", fmt.Sprintf("the bake beside failed after %s: %v", bakeTook.Round(time.Second), bakeErr))
		} else {
			e.res.set(p.key+"_s", bakeTook.Seconds())
		}
		// As many steps again on the same desktops without the bake, at
		// most busyWithoutSteps each.
		without := e.runLoops(ctx, c, ids, field, goButton, 0, min(busyWithoutSteps, max(1, with.steps.N()/len(ids))), nil)
		e.busyResult(p.key+"_with", with)
		e.busyResult(p.key+"_without", without)
	}
	after := e.cpu.Status()
	e.res.set(p.key+"_creates_queued", float64(after.Admitted-before.Admitted))
	e.res.set(p.key+"_creates_refused", float64(after.Refused-before.Refused))
	return ctx.Err()
}

// spin starts a busy loop on every virtual CPU of a desktop's guest.
func spin(ctx context.Context, c *client.Client, id string) error {
	res, err := c.Exec(ctx, id, api.ExecRequest{Shell: "for i in $(seq $(nproc)); do setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & done", Timeout: api.Duration(time.Minute)})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return fmt.Errorf("start the CPU hog on %s: %w", id, err)
	}
	return nil
}

// loopStats is what a run of loops saw.
type loopStats struct {
	mu         sync.Mutex
	steps      Dist
	errors     []string // steps that failed, words lost among them
	lost, late int
	notSettled int
	// notSettledTrue counts not-settled pictures after which the screen
	// changed within busyChangeWithin: the mark was true.
	notSettledTrue int
	probe          string  // what the create tried midway met
	pressure       float64 // the host's CPU pressure as the loops ended
}

func (s *loopStats) add(f func(*loopStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// runLoops runs one loop per desktop until each has run steps steps
// (when steps is set), or for d, or until stop is closed. A timed run
// tries one create midway.
func (e *env) runLoops(ctx context.Context, c *client.Client, ids []string, field, goButton image.Point, d time.Duration, steps int, stop <-chan struct{}) *loopStats {
	e.busyRuns++
	run := e.busyRuns
	st := &loopStats{}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var probe sync.WaitGroup
	if steps == 0 && d > 0 {
		timer := time.AfterFunc(d, cancel)
		defer timer.Stop()
		// The create may wait in the admission queue past the loops' end:
		// the run waits for its answer.
		probe.Add(1)
		go func() {
			defer probe.Done()
			select {
			case <-time.After(d / 2):
				e.probeCreate(ctx, c, st)
			case <-lctx.Done():
			}
		}()
	}
	if stop != nil {
		go func() {
			select {
			case <-stop:
				cancel()
			case <-lctx.Done():
			}
		}()
	}
	var loops sync.WaitGroup
	for i, id := range ids {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for step := 0; lctx.Err() == nil && (steps == 0 || step < steps); step++ {
				// Unique across the suite's runs: a word left in the
				// title by an earlier run never passes for this one.
				e.busyStep(lctx, c, id, field, goButton, fmt.Sprintf("r%d%c%04d", run, 'a'+i%26, step), st)
			}
		}()
	}
	loops.Wait()
	st.pressure = e.cpu.Pressure()
	cancel()
	probe.Wait()
	return st
}

// probeCreate tries one create and records what admission did to it.
func (e *env) probeCreate(ctx context.Context, c *client.Client, st *loopStats) {
	start := time.Now()
	d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: e.snap.Name})
	took := time.Since(start).Round(time.Millisecond)
	what := fmt.Sprintf("created in %s", took)
	if err != nil {
		what = fmt.Sprintf("failed after %s: %v", took, err)
	} else {
		c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	}
	st.add(func(s *loopStats) { s.probe = what })
}

// busyChangeWithin is how long after a picture marked not settled the
// screen is watched for the change that makes the mark true.
const busyChangeWithin = time.Second

// busyStep is one agent step; what it met goes into st. A step cut by the
// end of its run counts nothing.
func (e *env) busyStep(ctx context.Context, c *client.Client, id string, field, goButton image.Point, word string, st *loopStats) {
	start := time.Now()
	out, err := c.Actions(ctx, id, api.ActionsRequest{Actions: input.Batch{
		{Kind: input.KindClick, At: &input.Point{X: field.X, Y: field.Y}},
		{Kind: input.KindKey, Chord: "ctrl+a"},
		{Kind: input.KindType, Text: word},
		{Kind: input.KindClick, At: &input.Point{X: goButton.X, Y: goButton.Y}},
	}, Screenshot: true})
	took := time.Since(start)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		st.add(func(s *loopStats) { s.errors = append(s.errors, fmt.Sprintf("%s step %s: %v", id, word, err)) })
		return
	}
	settled := out.Screenshot != nil && out.Screenshot.Settle != nil && out.Screenshot.Settle.Settled
	changed := !settled && out.Screenshot != nil && e.changesAfter(ctx, id, out.Screenshot.Counter, busyChangeWithin)
	want := "clicked: " + word
	title, readErr := e.pageTitle(ctx, c, id)
	early := title != want
	if early {
		poll(ctx, busyTitleWithin, func() bool { title, readErr = e.pageTitle(ctx, c, id); return title == want })
	}
	if ctx.Err() != nil {
		return
	}
	st.add(func(s *loopStats) {
		s.steps.Add(took)
		switch {
		case title == want && early && settled:
			s.late++ // the settled picture came before the page took the word
		case title == want:
		case readErr != nil && title == "":
			s.errors = append(s.errors, fmt.Sprintf("%s step %s: the title could not be read back: %v", id, word, readErr))
		default:
			s.lost++
			s.errors = append(s.errors, fmt.Sprintf("%s step %s: the page said %q", id, word, title))
		}
		if !settled {
			s.notSettled++
			if changed {
				s.notSettledTrue++
			}
		}
	})
}

// changesAfter tells whether a desktop's screen changes past counter
// within d.
func (e *env) changesAfter(ctx context.Context, id string, counter uint64, d time.Duration) bool {
	scr, ok := e.screens.Get(id)
	if !ok {
		return false
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		seq, changed := scr.Mirror.Changed()
		if seq > counter {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// pageTitle reads the title of Chromium's window after a Go: "" when no
// window has one yet, an error when it could not be read.
func (e *env) pageTitle(ctx context.Context, c *client.Client, id string) (string, error) {
	res, err := c.Exec(ctx, id, api.ExecRequest{Shell: "DISPLAY=:0 xdotool search --name '^clicked: ' getwindowname %@", Timeout: api.Duration(20 * time.Second)})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", nil // no window titled after a Go (yet)
	}
	return strings.TrimSuffix(strings.TrimSpace(res.Stdout), " - Chromium"), nil
}

// busyResult records a phase's figures under key.
func (e *env) busyResult(key string, st *loopStats) {
	e.res.set(key+"_steps", float64(st.steps.N()))
	if st.steps.N() > 0 {
		e.res.dist(key+"_step", &st.steps)
		e.res.set(key+"_step_p99_ms", ms(st.steps.Percentile(99)))
	} else {
		e.res.null(key+"_step_p50_ms", "no step finished")
	}
	e.res.set(key+"_errors", float64(len(st.errors)-st.lost))
	e.res.set(key+"_words_lost", float64(st.lost))
	e.res.set(key+"_words_late", float64(st.late))
	e.res.set(key+"_not_settled", float64(st.notSettled))
	e.res.set(key+"_not_settled_true", float64(st.notSettledTrue))
	e.res.set(key+"_cpu_pressure", st.pressure)
	for i, msg := range st.errors {
		if i == 5 {
			e.res.note(fmt.Sprintf("%s: %d more errors", key, len(st.errors)-5))
			break
		}
		e.res.note(key + ": " + msg)
	}
	if st.probe != "" {
		e.res.note(key + ": a create midway " + st.probe)
	}
	e.progress("  %s: %d steps, p50 %s p95 %s, %d errors, %d words lost, %d late, %d of %d not settled (%d true)",
		key, st.steps.N(), st.steps.Percentile(50).Round(time.Millisecond), st.steps.Percentile(95).Round(time.Millisecond),
		len(st.errors)-st.lost, st.lost, st.late, st.notSettled, st.steps.N(), st.notSettledTrue)
}

// bakeBeside bakes the measured snapshot's image again, into a catalog of
// its own that goes with the run, as hostd snapshot bake would beside a
// serving hostd.
func (e *env) bakeBeside(ctx context.Context) error {
	im, err := images.Find(e.opts.Paths.CacheDir, e.snap.Manifest.Image.Hash)
	if err != nil {
		return err
	}
	cat, remove, err := e.tempCatalog("bake-beside-")
	if err != nil {
		return err
	}
	defer remove()
	_, err = images.Bake(ctx, images.BakeOptions{
		Driver: e.drv, Catalog: cat, Image: im, Name: "bake-beside",
		CPUs: e.snap.Manifest.Machine.CPUs, MemoryMiB: e.snap.Manifest.Machine.MemoryMiB,
		Settle: func(ctx context.Context, m desktop.Machine) error {
			_, err := settle.Machine(ctx, m, 2*time.Second, 5*time.Minute, e.log)
			return err
		},
	})
	return err
}
