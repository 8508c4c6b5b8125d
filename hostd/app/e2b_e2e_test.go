package app_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The E2B example (examples/e2b) runs E2B's own SDKs, `e2b` and
// `@computesdk/e2b` from npm, unmodified, against a whole hostd on the
// minimal snapshot: only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// point them here. Its node tests create two sandboxes at once, stream a
// command's output, kill a background command by pid after its client
// left, move files both ways, time out, pause, connect and kill.
func TestE2BExample(t *testing.T) {
	dir, err := filepath.Abs("../../examples/e2b")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the E2B example (scripts/setup installs it): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "e2b")); err != nil {
		t.Fatalf("examples/e2b has no e2b SDK (scripts/setup runs npm ci there): %v", err)
	}
	cfg, snap := hostConfig(t, "qemu", "minimal")
	cfg.E2BTemplates = map[string]string{"base": snap}
	h := openHost(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", "test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+h.srv.URL+"/e2b",
		"E2B_SANDBOX_URL="+h.srv.URL+"/e2b",
		"E2B_API_KEY=e2b_"+h.a.Token,
		"TEMPLATE=base",
	)
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var passed []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		t.Logf("e2b: %s", lines.Text())
		if name, ok := strings.CutPrefix(lines.Text(), "ok "); ok {
			_, name, _ = strings.Cut(name, " - ")
			passed = append(passed, name)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the E2B example failed: %v", err)
	}
	if len(passed) != 2 {
		t.Errorf("tests passed: %q, want both", passed)
	}
	if ds, err := h.c.Desktops(ctx); err != nil || len(ds) != 0 {
		t.Errorf("sandboxes left after the example: %v %v", ds, err)
	}
}
