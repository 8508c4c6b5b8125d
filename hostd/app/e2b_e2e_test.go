package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// The E2B example (examples/e2b) runs E2B's own SDKs, `e2b` and
// `@computesdk/e2b` from npm, unmodified, against a whole hostd on the
// minimal snapshot: only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// point them here. Its node tests create two sandboxes at once, stream a
// command's output, kill a background command by pid after its client
// left, move files both ways, time out, pause, connect and kill.
func TestE2BExample(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "minimal")
	cfg.E2BTemplates = map[string]string{"base": snap}
	runE2BExample(t, cfg, "test.mjs", 2)
}

// The desktop half: @e2b/desktop's own create and every mouse, keyboard
// and screen call, on the e2b-desktop recipe's snapshot (XFCE at bake).
func TestE2BDesktopExample(t *testing.T) {
	baked := testenv.RecipeSnapshot(t, "../../examples/recipes/e2b-desktop.yaml")
	cfg, _ := hostConfig(t, "qemu", "minimal")
	if err := os.Symlink(baked.Snapshot.Dir, filepath.Join(cfg.Snapshots(), baked.Snapshot.Name)); err != nil {
		t.Fatal(err)
	}
	cfg.E2BTemplates = map[string]string{"desktop": baked.Snapshot.Name}
	cfg.E2BDomain = "desktops.test"
	runE2BExample(t, cfg, "desktop.mjs", 1, "DOMAIN=desktops.test")
}

// runE2BExample runs one of examples/e2b's node test files against a
// hostd and wants all its tests to pass.
func runE2BExample(t *testing.T, cfg config.Serve, file string, tests int, env ...string) {
	dir, err := filepath.Abs("../../examples/e2b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "e2b")); err != nil {
		t.Fatalf("examples/e2b has no e2b SDK (scripts/setup runs npm ci there): %v", err)
	}
	h := openHost(t, cfg)
	runNodeTests(t, dir, append([]string{
		"E2B_API_URL=" + h.srv.URL + "/e2b",
		"E2B_SANDBOX_URL=" + h.srv.URL + "/e2b",
		"E2B_API_KEY=e2b_" + h.a.Token,
	}, env...), file, tests, "e2b")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ds, err := h.c.Desktops(ctx); err != nil || len(ds) != 0 {
		t.Errorf("sandboxes left after the example: %v %v", ds, err)
	}
}
