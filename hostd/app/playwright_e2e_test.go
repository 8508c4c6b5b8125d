package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// appPage is the page under test of the Playwright example: a form that
// greets and counts visits in localStorage.
const appPage = `<!doctype html><title>greeter</title>
<input id="name" placeholder="name"> <button id="send">Send</button>
<p id="out"></p>
<script>
document.getElementById('send').onclick = function () {
  localStorage.setItem('visits', String(Number(localStorage.getItem('visits') || 0) + 1));
  document.getElementById('out').textContent = 'hello, ' + document.getElementById('name').value;
};
</script>`

// The Playwright example (examples/playwright) runs as a user runs it:
// Node and playwright-core from npm, no browser download, against a whole
// hostd on a browser snapshot. It creates one desktop whose network allows
// only the page's server on the host's loopback and whose clock starts in
// 2030; its two cases connect with connectOverCDP, with a reset between
// them that must leave neither the first case's localStorage nor a clock
// other than the one asked for.
func TestPlaywrightExample(t *testing.T) {
	dir, err := filepath.Abs("../../examples/playwright")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("examples/playwright has no playwright-core (scripts/setup runs npm ci there): %v", err)
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, appPage)
	}))
	t.Cleanup(app.Close)
	cfg, snap := hostConfig(t, "qemu", "browser")
	h := openHost(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var passed []string
	err = runNode(ctx, t, dir, []string{
		"HOSTD_URL=" + h.srv.URL,
		"HOSTD_TOKEN=" + h.a.Token,
		"APP_URL=http://host:" + strconv.Itoa(portOf(t, app.URL)) + "/",
		"SNAPSHOT=" + snap,
	}, func(line string) {
		t.Logf("example: %s", line)
		var r struct {
			Test      string `json:"test"`
			OK        bool   `json:"ok"`
			ConnectMs int    `json:"connect_ms"`
			ResetMs   int    `json:"reset_ms"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.OK {
			passed = append(passed, r.Test)
			if len(passed) == 2 && r.ResetMs <= 0 {
				t.Errorf("the second case reports no reset before it: %s", line)
			}
		}
	}, "test.mjs")
	if err != nil {
		t.Fatalf("the Playwright example failed: %v", err)
	}
	if strings.Join(passed, ", ") != "greets by name, starts clean" {
		t.Errorf("cases passed: %q, want both", passed)
	}
	// The example deleted its desktop.
	if ds, err := h.c.Desktops(ctx); err != nil || len(ds) != 0 {
		t.Errorf("desktops left after the example: %v %v", ds, err)
	}
}

// runNode runs node with args in dir, passing each line it prints to
// onLine and what it writes on stderr to the test's log.
func runNode(ctx context.Context, t *testing.T, dir string, env []string, onLine func(string), args ...string) error {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed (scripts/setup installs it): %v", err)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		onLine(lines.Text())
	}
	return cmd.Wait()
}

// runNodeTests runs one file of node tests (node --test) in dir and wants
// exactly tests of them to pass; label prefixes their output in the log.
func runNodeTests(t *testing.T, dir string, env []string, file string, tests int, label string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var passed []string
	err := runNode(ctx, t, dir, env, func(line string) {
		t.Logf("%s: %s", label, line)
		if name, ok := strings.CutPrefix(line, "ok "); ok {
			_, name, _ = strings.Cut(name, " - ")
			passed = append(passed, name)
		}
	}, "--test", "--test-reporter=tap", file)
	if err != nil {
		t.Fatalf("%s: %s failed: %v", label, file, err)
	}
	if len(passed) != tests {
		t.Errorf("%s: tests passed: %q, want %d", label, passed, tests)
	}
}

// testWriter logs what a child writes on stderr.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
