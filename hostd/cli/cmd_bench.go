package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/hostd/bench"
	"github.com/warmdesk/warmdesk/hostd/config"
)

func cmdBench(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench")
	o := bench.Options{Paths: config.DefaultPaths(), LibvirtURI: "qemu:///system"}
	o.Paths.Register(fs)
	fs.StringVar(&o.Snapshot, "snapshot", "minimal", "snapshot to measure")
	fs.StringVar(&o.CompareSnapshot, "compare-snapshot", "", "a second snapshot the create suite measures beside --snapshot, alternating (a recipe's against minimal)")
	fs.StringVar(&o.BrowserSnapshot, "browser-snapshot", "browser", "browser snapshot for the suites that drive Chromium (action, trials, browsertool, busy)")
	fs.StringVar(&o.PlaywrightDir, "playwright-dir", "examples/playwright", "directory whose node_modules has playwright-core, for the action suite's Playwright connect")
	fs.StringVar(&o.E2BSnapshot, "e2b-snapshot", "e2b-desktop", "the e2b-desktop recipe's snapshot, for the e2b suite (E2B's @e2b/desktop SDK) and the peers suite (it has xdotool and scrot)")
	fs.StringVar(&o.E2BDir, "e2b-dir", "examples/e2b", "directory whose node_modules has @e2b/desktop, for the e2b suite")
	suites := fs.String("suites", strings.Join(bench.Suites, ","), "suites to run, comma-separated: "+strings.Join(bench.Suites, ", "))
	fs.IntVar(&o.N, "n", 20, "samples per create method and per browsertool call; the network and volume suites scale theirs by it")
	fs.IntVar(&o.ColdN, "cold-n", 2, "cold boots (each about a minute under TCG)")
	fs.IntVar(&o.K, "k", 10, "idle desktops for the density suite")
	fs.IntVar(&o.Trials, "trials", bench.DefaultTrials, "times the trials suite runs each trial (input landing where it was aimed)")
	o.Busy = bench.DefaultBusy()
	busyN := fs.String("busy-n", joinInts(o.Busy.N), "busy suite: desktops running agent loops at once, a phase each, comma-separated")
	fs.DurationVar(&o.Busy.For, "busy-for", o.Busy.For, "busy suite: how long each phase's loops run")
	fs.IntVar(&o.Busy.Hogs, "busy-hogs", 0, "busy suite: also one loop beside this many desktops spinning every virtual CPU (0: no such phase)")
	fs.IntVar(&o.Busy.BakeBeside, "busy-bake-beside", o.Busy.BakeBeside, "busy suite: also this many loops beside a bake of --snapshot's image (0: no such phase)")
	fs.IntVar(&o.BudgetMiB, "budget-mib", 0, "host memory budget for 'most desktops that fit' (default: all host memory)")
	fs.StringVar(&o.LibvirtURI, "libvirt-uri", o.LibvirtURI, "libvirtd for the libvirt comparisons")
	asJSON := fs.Bool("json", false, "print one JSON object with stable keys")
	report := fs.String("report", "", "also write report.html (SVG charts) and results.json into this directory")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	o.Suites = strings.Split(*suites, ",")
	if o.N < 1 || o.ColdN < 0 || o.K < 1 || o.Trials < 1 {
		return usagef("-n, -k and -trials must be at least 1, -cold-n at least 0")
	}
	var err error
	if o.Busy.N, err = parseCounts(*busyN); err != nil {
		return usagef("-busy-n %q: %v", *busyN, err)
	}
	if o.Busy.For <= 0 || o.Busy.Hogs < 0 || o.Busy.BakeBeside < 0 {
		return usagef("-busy-for must be positive, -busy-hogs and -busy-bake-beside at least 0")
	}
	if o.BudgetMiB == 0 {
		o.BudgetMiB = bench.HostMemoryMiB()
	}
	o.Log = e.log
	o.Progress = e.stderr
	res, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	if *report != "" {
		if err := bench.WriteReport(*report, res); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "report written to %s/report.html\n", *report)
	}
	if *asJSON {
		return bench.WriteJSON(e.stdout, res)
	}
	return bench.WriteTable(e.stdout, res)
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// parseCounts parses a comma-separated list of counts from 1 to 64.
func parseCounts(list string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("%q is not a count from 1 to 64: give numbers separated by commas, such as 1,2,4,8", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
