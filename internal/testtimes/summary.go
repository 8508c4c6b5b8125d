package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is how long a package or a test took, and its outcome.
type timing struct {
	Package, Test string
	Elapsed       time.Duration
	Action        string // pass, fail or skip
}

type summary struct {
	packages []timing
	tests    []timing
	// held is each running test's output, printed only if it fails, as
	// plain go test does; a package's own lines are held the same way.
	held map[string][]string
}

func newSummary() *summary { return &summary{held: map[string][]string{}} }

// line takes one line of input. A line that is not a test event (a
// message of go itself) is printed as it is.
func (s *summary) line(raw []byte, out io.Writer) {
	var e event
	if err := json.Unmarshal(raw, &e); err != nil || e.Action == "" {
		fmt.Fprintf(out, "%s\n", raw)
		return
	}
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		s.held[key] = append(s.held[key], e.Output)
	case "build-output":
		fmt.Fprint(out, e.Output)
	case "pass", "fail", "skip":
		t := timing{Package: e.Package, Test: e.Test, Elapsed: time.Duration(e.Elapsed * float64(time.Second)), Action: e.Action}
		lines := s.held[key]
		delete(s.held, key)
		if e.Test == "" {
			s.packages = append(s.packages, t)
			// The package's own lines: its ok or FAIL line, and what its
			// test binary printed outside any test.
			for _, l := range lines {
				if e.Action == "fail" || !strings.HasPrefix(l, "PASS") && !strings.HasPrefix(l, "=== ") {
					fmt.Fprint(out, l)
				}
			}
			return
		}
		s.tests = append(s.tests, t)
		if e.Action == "fail" {
			fmt.Fprint(out, strings.Join(lines, ""))
		} else if parent, _, sub := strings.Cut(e.Test, "/"); sub {
			// A passing subtest's lines go with its parent's, in case the
			// parent fails.
			pkey := e.Package + "\x00" + parent
			s.held[pkey] = append(s.held[pkey], lines...)
		}
	}
}

// print writes each package's time, slowest first, and the n slowest
// top-level tests.
func (s *summary) print(out io.Writer, n int) {
	byTime := func(a, b timing) int { return int(b.Elapsed - a.Elapsed) }
	// Packages without tests are left out.
	pkgs := slices.DeleteFunc(slices.Clone(s.packages), func(p timing) bool { return p.Action == "skip" })
	slices.SortStableFunc(pkgs, byTime)
	var total time.Duration
	fmt.Fprintf(out, "\ntest times: packages, slowest first\n")
	for _, p := range pkgs {
		total += p.Elapsed
		fmt.Fprintf(out, "  %8.1f s  %-4s %s\n", p.Elapsed.Seconds(), p.Action, p.Package)
	}
	fmt.Fprintf(out, "  %8.1f s  in all (packages run side by side: the wall time is less)\n", total.Seconds())
	var top []timing
	for _, t := range s.tests {
		if !strings.Contains(t.Test, "/") {
			top = append(top, t)
		}
	}
	slices.SortStableFunc(top, byTime)
	fmt.Fprintf(out, "test times: the %d slowest tests\n", min(n, len(top)))
	for _, t := range top[:min(n, len(top))] {
		fmt.Fprintf(out, "  %8.1f s  %-4s %s %s\n", t.Elapsed.Seconds(), t.Action, t.Package, t.Test)
	}
}
