package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// TestTrialsLandEveryTime runs the trials suite with 10 trials per path
// (WARMDESK_TRIALS for more; the bench's default of 50 gives the rates in
// docs/BENCHMARKS.md): input through every door lands where it was aimed,
// every time. 10 are enough to catch a regression of the kind seen before
// (a click's keys lost in 2 of 50).
func TestTrialsLandEveryTime(t *testing.T) {
	n := 10
	if v := os.Getenv("WARMDESK_TRIALS"); v != "" {
		n = atoi(t, v)
	}
	res := runOnMinimalAndBrowser(t, 40*time.Minute, Options{Suites: []string{"trials"}, Trials: n})
	for _, key := range TrialKeys {
		if v := res.Keys[key]; v == nil || *v != 1 {
			t.Errorf("%s = %v, want every one of %d trials landed", key, v, n)
		}
	}
}

// runOnMinimalAndBrowser runs the bench with o's suites and settings on
// the minimal snapshot, with the browser snapshot beside it in one catalog,
// within d, and fails the test if the run fails. It logs the progress and
// the notes.
func runOnMinimalAndBrowser(t *testing.T, d time.Duration, o Options) *Result {
	t.Helper()
	minimal := testenv.Snapshot(t, "minimal")
	browser := testenv.Snapshot(t, "browser")
	if err := os.Symlink(browser.Snapshot.Dir, filepath.Join(minimal.Catalog.Dir(), browser.Snapshot.Name)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var progress bytes.Buffer
	o.Paths = config.Paths{StateDir: testenv.DataDir(t), CacheDir: testenv.CacheDir(), RunDir: testenv.RunDir(t)}
	o.SnapshotsDir, o.Snapshot, o.BrowserSnapshot = minimal.Catalog.Dir(), minimal.Snapshot.Name, browser.Snapshot.Name
	o.Log, o.Progress = testenv.Logger(t), &progress
	res, err := Run(ctx, o)
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range res.Notes {
		t.Log(note)
	}
	return res
}

func atoi(t *testing.T, v string) int {
	t.Helper()
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("WARMDESK_TRIALS=%q: want a positive number", v)
	}
	return n
}
