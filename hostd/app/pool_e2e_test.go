package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A snapshot that enters the catalog while hostd serves (as `hostd
// snapshot bake` from the CLI puts it there) gets its warm pool from the
// serving hostd, and loses it when it leaves, with no restart.
func TestPoolStartsForASnapshotAddedWhileServing(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "minimal")
	link := filepath.Join(cfg.Snapshots(), snap)
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	cfg.Limits.PoolSize = 1
	h := openHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if got := pools(ctx, t, h); len(got) != 0 {
		t.Fatalf("an empty catalog lists %v", got)
	}

	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(2*time.Minute, 50*time.Millisecond, time.Second, func() bool { return pools(ctx, t, h)[snap] == 1 }) {
		t.Fatalf("the pool of %s, baked while hostd served: %v, want 1 ready", snap, pools(ctx, t, h))
	}

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	// The machine the pool held ends with it: no QEMU of the test's runs.
	if !testenv.Poll(time.Minute, 50*time.Millisecond, time.Second, func() bool { return len(testenv.QEMUsUnder(cfg.RunDir)) == 0 }) {
		t.Fatalf("the pool's machines outlived their snapshot: QEMUs %v", testenv.QEMUsUnder(cfg.RunDir))
	}
}

// pools is GET /v1/snapshots as snapshot → machines ready.
func pools(ctx context.Context, t *testing.T, h *host) map[string]int {
	t.Helper()
	list, err := h.c.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range list {
		out[s.Name] = s.Pool
	}
	return out
}
