package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/egress"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/internal/cpupressure"
	"github.com/warmdesk/warmdesk/netpolicy"
	"github.com/warmdesk/warmdesk/vnc"
	"github.com/warmdesk/warmdesk/volume"
	"github.com/warmdesk/warmdesk/web"
)

// Suites, in the order they run.
var Suites = []string{"create", "screenshot", "action", "windows", "trials", "browsertool", "density", "fork", "network", "volume", "e2b", "peers", "fleet", "busy"}

// Options configure a run.
type Options struct {
	Paths    config.Paths
	Snapshot string
	// BrowserSnapshot is the browser image's snapshot, for the action
	// suite's click-then-type on Chromium; absent makes those keys null.
	BrowserSnapshot string
	// CompareSnapshot, when set, is measured by the create suite beside
	// Snapshot (a recipe's snapshot against minimal, say).
	CompareSnapshot string
	// PlaywrightDir holds node_modules/playwright-core, for the action
	// suite's Playwright connect; absent makes its key null.
	PlaywrightDir string
	// E2BSnapshot is the e2b-desktop recipe's snapshot and E2BDir holds
	// node_modules/@e2b/desktop, for the e2b suite; absent makes its keys
	// null.
	E2BSnapshot, E2BDir string
	Suites              []string
	// N is the number of samples per create method (cold boots: ColdN),
	// of the browsertool suite's calls and turns, and scales the network
	// and volume suites' samples.
	N, ColdN int
	// K is the number of idle desktops of the density suite.
	K int
	// BudgetMiB is the host memory budget for "most desktops that fit".
	BudgetMiB int
	// LibvirtURI is tried for the libvirt comparisons; absent libvirtd
	// makes them null.
	LibvirtURI string
	// SnapshotsDir overrides the catalog (default Paths.Snapshots()).
	SnapshotsDir string
	// ForkSizes are the fork suite's copy counts (default 1, 3, 10).
	ForkSizes []int
	// Trials is how many times the trials suite runs each trial
	// (default DefaultTrials).
	Trials int
	// Busy configures the busy suite (zero: DefaultBusy).
	Busy BusyOptions
	Log  *slog.Logger
	// Progress receives a line per step.
	Progress io.Writer
}

// Result is one run: the stable keys of --json, plus context.
type Result struct {
	Machine Machine `json:"machine"`
	// Keys holds every measured figure under a stable, documented key; a
	// comparison that could not run is null, never made up.
	Keys map[string]*float64 `json:"results"`
	// Notes say why a null is null, and other caveats.
	Notes []string `json:"notes"`
	// Samples keeps the raw distributions, for the report.
	Samples map[string][]float64 `json:"samples_ms"`
	Started time.Time            `json:"started"`
	Took    float64              `json:"took_s"`
}

// Machine states where the numbers came from.
type Machine struct {
	Accel     string `json:"accel"`
	QEMU      string `json:"qemu"`
	CPUs      int    `json:"cpus"`
	MemoryMiB int    `json:"host_memory_mib"`
	Snapshot  string `json:"snapshot"`
	Guest     string `json:"guest"`
}

func (r *Result) set(key string, v float64) { r.Keys[key] = &v }
func (r *Result) null(key, why string) {
	r.Keys[key] = nil
	r.note(key + ": " + why)
}
func (r *Result) note(s string) { r.Notes = append(r.Notes, s) }

func (r *Result) dist(prefix string, d *Dist) {
	r.set(prefix+"_p50_ms", ms(d.Percentile(50)))
	r.set(prefix+"_p95_ms", ms(d.Percentile(95)))
	r.set(prefix+"_max_ms", ms(d.Max()))
	var s []float64
	for _, v := range d.Samples {
		s = append(s, ms(v))
	}
	r.Samples[prefix] = s
}

// env is what the suites share: a QEMU driver and Manager of the
// harness's own, on the host's snapshot catalog, with its own runtime and
// data directories, so nothing it does touches a running hostd's desktops.
type env struct {
	opts    Options
	log     *slog.Logger
	drv     *qemu.Driver
	cat     *desktop.Catalog
	snap    desktop.Snapshot
	mgr     *desktop.Manager
	screens *drive.Mirrors
	// cpu admits creates by the host's CPU pressure, as in hostd serve.
	cpu     *desktop.CPUAdmission
	runDir  string
	dataDir string
	res     *Result
	// volErr says why the run has no volumes.
	volErr string
	// busyRuns counts the busy suite's runs of loops, to tell their
	// words apart.
	busyRuns int

	mu       sync.Mutex
	machines []desktop.Machine // driver-level machines to clean up
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.opts.Progress, "bench: "+format+"\n", args...)
}

// Run runs the selected suites and returns their results. Every desktop it
// made is deleted before it returns, also when ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	res := &Result{Keys: map[string]*float64{}, Samples: map[string][]float64{}, Started: time.Now().UTC()}
	if o.SnapshotsDir == "" {
		o.SnapshotsDir = o.Paths.Snapshots()
	}
	if len(o.ForkSizes) == 0 {
		o.ForkSizes = []int{1, 3, 10}
	}
	if len(o.Busy.N) == 0 && o.Busy.Steps == 0 && o.Busy.For == 0 && o.Busy.Hogs == 0 && o.Busy.BakeBeside == 0 {
		o.Busy = DefaultBusy()
	}
	if o.Busy.For <= 0 && o.Busy.Steps <= 0 {
		o.Busy.For = DefaultBusy().For
	}
	// After the defaults: the suites read e.opts.
	e := &env{opts: o, log: o.Log, res: res}
	cat, err := desktop.NewCatalog(o.SnapshotsDir)
	if err != nil {
		return nil, err
	}
	e.cat = cat
	if e.snap, err = cat.Get(o.Snapshot); err != nil {
		return nil, err
	}
	// Data next to the snapshots (disk freezes are hard links); sockets in
	// a short directory.
	if e.dataDir, err = os.MkdirTemp(o.Paths.StateDir, "bench-"); err != nil {
		return nil, err
	}
	// As hostd serve does: QEMU, as each machine's own user, passes
	// through the state directory to its machine's directory.
	if err := os.Chmod(o.Paths.StateDir, 0o711); err != nil {
		return nil, err
	}
	defer os.RemoveAll(e.dataDir)
	if e.runDir, err = os.MkdirTemp("", "wdb"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(e.runDir)
	limits := desktop.DefaultLimits()
	limits.MaxDesktops, limits.MaxMemoryMiB, limits.PoolSize = 64, 1<<20, 0
	// The screens and the CPU admission come first: the driver's pool
	// refills wait on them, as in hostd serve.
	e.screens = drive.NewMirrors(context.WithoutCancel(ctx), o.Log)
	e.cpu = desktop.NewCPUAdmission(cpupressure.Host(), limits)
	if e.drv, err = qemu.New(ctx, qemu.Options{
		RunDir: e.runDir, DataDir: e.dataDir, SnapshotsDir: o.SnapshotsDir, RefillGate: e.screens.RefillGate(), RefillWait: e.cpu.WaitIdle,
		Warmup: e.screens.Warmup(drive.WarmPooled), Logger: o.Log,
	}); err != nil {
		return nil, err
	}
	defer e.drv.Close()
	// hostd's own records store, so a create pays for its durable writes.
	records, err := store.Open(filepath.Join(e.dataDir, "records.db"))
	if err != nil {
		return nil, err
	}
	defer records.Close()
	shape := e.drv.Shape()
	res.Machine = Machine{Accel: shape.Accel, QEMU: shape.QEMUVersion, CPUs: runtime.NumCPU(), MemoryMiB: HostMemoryMiB(),
		Snapshot: e.snap.Name, Guest: fmt.Sprintf("%s image, %d MiB, %d vCPUs, %dx%d", e.snap.Manifest.Image.Flavor,
			e.snap.Manifest.Machine.MemoryMiB, e.snap.Manifest.Machine.CPUs, e.snap.Manifest.Machine.Width, e.snap.Manifest.Machine.Height)}
	// Every desktop gets its egress network, as in hostd serve.
	nets := egress.NewSet(egress.SetConfig{
		Policy: func(id string) (netpolicy.Policy, error) {
			d, err := e.mgr.Get(id)
			return d.Network, err
		},
		Logger: o.Log,
	})
	defer nets.Close()
	// A volume registry of the run's own.
	vols, err := volume.Open(volume.Config{Dir: filepath.Join(e.dataDir, "volumes"), Store: records})
	if err != nil {
		e.volErr = err.Error()
	}
	e.mgr = desktop.NewManager(ctx, desktop.Config{Driver: e.drv, Store: records, Catalog: cat, Logger: o.Log, Limits: limits,
		Observer: desktop.Observers{e.screens, nets}, Volumes: vols, CPU: e.cpu})
	defer e.cleanup()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go e.mgr.Run(runCtx)
	e.progress("%s, QEMU %s, %d CPUs, snapshot %s (%s)", res.Machine.Accel, res.Machine.QEMU, res.Machine.CPUs, e.snap.Name, res.Machine.Guest)
	// Hash the snapshot once now, so no create below pays for it.
	if err := cat.Verify(e.snap); err != nil {
		return nil, err
	}
	start := time.Now()
	for _, s := range o.Suites {
		if ctx.Err() != nil {
			break
		}
		e.progress("suite %s", s)
		began := time.Now()
		var err error
		switch s {
		case "create":
			err = e.createSuite(ctx)
		case "screenshot":
			err = e.screenshotSuite(ctx)
		case "action":
			err = e.actionSuite(ctx)
		case "windows":
			err = e.windowsSuite(ctx)
		case "trials":
			err = e.trialsSuite(ctx)
		case "browsertool":
			err = e.browsertoolSuite(ctx)
		case "density":
			err = e.densitySuite(ctx)
		case "fork":
			err = e.forkSuite(ctx)
		case "network":
			err = e.networkSuite(ctx)
		case "volume":
			err = e.volumeSuite(ctx)
		case "e2b":
			err = e.e2bSuite(ctx)
		case "peers":
			err = e.peersSuite(ctx)
		case "fleet":
			err = e.fleetSuite(ctx)
		case "busy":
			err = e.busySuite(ctx)
		default:
			err = fmt.Errorf("unknown suite %q: use %s", s, strings.Join(Suites, ", "))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("suite %s: %w", s, err)
		}
		e.cleanupDesktops()
		// Each suite's own time, so a slower one is seen in the report
		// (and in CI's smoke run) the day it lands.
		took := time.Since(began).Seconds()
		res.set("suite_"+s+"_s", took)
		e.progress("suite %s took %.0f s", s, took)
	}
	res.Took = time.Since(start).Seconds()
	sort.Strings(res.Notes)
	return res, ctx.Err()
}

// cleanup deletes everything the run made, whatever happened.
func (e *env) cleanup() {
	e.cleanupDesktops()
	e.mgr.Close()
}

func (e *env) cleanupDesktops() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, d := range e.mgr.List() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.mgr.Delete(ctx, d.ID); err != nil {
				e.log.Warn("bench cleanup", "desktop", d.ID, "err", err)
			}
		}()
	}
	e.mu.Lock()
	ms := e.machines
	e.machines = nil
	e.mu.Unlock()
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); m.Destroy(ctx) }()
	}
	wg.Wait()
}

// tempCatalog is an empty snapshot catalog in the run's data directory,
// and what removes it.
func (e *env) tempCatalog(prefix string) (*desktop.Catalog, func(), error) {
	dir, err := os.MkdirTemp(e.dataDir, prefix)
	if err != nil {
		return nil, nil, err
	}
	cat, err := desktop.NewCatalog(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cat, func() { os.RemoveAll(dir) }, nil
}

// benchToken is the token of the servers the suites serve the API with.
const benchToken = "bench-token"

// serve serves the API over the run's Manager on a loopback port, as
// hostd serve does, and returns a client of it.
func (e *env) serve(ctx context.Context) (*httptest.Server, *client.Client) {
	svc := drive.New(ctx, drive.Config{Manager: e.mgr, Screens: e.screens, Logger: e.log, Pressure: e.cpu.Pressure})
	srv := httptest.NewServer(web.New(web.Config{Manager: e.mgr, Drive: svc, Token: benchToken, Logger: e.log, CPU: e.cpu}).Handler())
	return srv, client.New(srv.URL, benchToken)
}

func (e *env) track(m desktop.Machine) {
	e.mu.Lock()
	e.machines = append(e.machines, m)
	e.mu.Unlock()
}

// waitNonBlank waits until a mirror holds a frame that is not one colour.
func waitNonBlank(ctx context.Context, src interface {
	Changed() (uint64, <-chan struct{})
	Frame(*image.RGBA) (*image.RGBA, uint64)
	Poke()
}) error {
	var buf *image.RGBA
	for {
		_, ch := src.Changed()
		var seq uint64
		buf, seq = src.Frame(buf)
		if seq > 0 && !desktop.BlankScreen(buf) {
			return nil
		}
		src.Poke()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("no picture on the screen: %w", ctx.Err())
		}
	}
}

// mirrorOf attaches a fresh mirror to a machine, for driver-level restores
// that have no Manager behind them.
func mirrorOf(ctx context.Context, m desktop.Machine, log *slog.Logger) *vnc.Mirror {
	mr := vnc.NewMirror(vnc.MirrorOptions{Dial: m.DialVNC, Logger: log})
	go mr.Run(ctx)
	return mr
}

// HostMemoryMiB is the host's total memory.
func HostMemoryMiB() int {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
		}
	}
	return kb / 1024
}

// WriteJSON prints a result as one JSON object.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

var errSkip = errors.New("skipped")

// pathIn joins under the harness's data directory.
func (e *env) pathIn(name string) string { return filepath.Join(e.dataDir, name) }
