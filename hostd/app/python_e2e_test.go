package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/internal/testenv"
)

// The Python client's own test suite (clients/python/tests, Debian's
// python3, standard library only) against a whole hostd on QEMU with the
// minimal snapshot: lifecycle, the three vendor adapters (a recorded
// toolset turn with a failure in the middle among them), the toolset's
// configs, windows moved and resized on openbox, exec and files. web's
// TestPythonClient runs the same suite on the fake driver.
func TestPythonClientOnQEMU(t *testing.T) {
	testenv.Require(t, "python3")
	cfg, snap := hostConfig(t, "qemu", "minimal")
	h := openHost(t, cfg)
	dir, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WARMDESK_ADDR="+h.srv.URL, "WARMDESK_TOKEN="+h.a.Token, "WARMDESK_TEST_SNAPSHOT="+snap,
		"PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
	if ds, err := h.c.Desktops(t.Context()); err != nil || len(ds) != 0 {
		t.Errorf("desktops left after the suite: %v %v", ds, err)
	}
}
