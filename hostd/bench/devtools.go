package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/desktop"
)

// devtoolsSamples is the number of fresh browser desktops the DevTools
// connection is timed on.
const devtoolsSamples = 9

// devtoolsSuite measures how soon a browser test can start on a new
// desktop: from the create returning to a DevTools client having the
// browser's version through hostd, which is what Playwright's
// connectOverCDP does first (GET /json/version, open the browser's
// WebSocket, Browser.getVersion). It needs the browser snapshot.
func (e *env) devtoolsSuite(ctx context.Context, base, token string) error {
	snap, ok, err := e.browserSnapshot("devtools_connect_p50_ms")
	if !ok || err != nil {
		if err == nil {
			e.res.null("playwright_connect_p50_ms", "no browser snapshot (see devtools_connect_p50_ms)")
		}
		return err
	}
	// Each create takes a machine from the warm pool, as on a serving
	// hostd, and its refill is not left to compete with the next sample.
	e.drv.Warm(snap, 1)
	defer e.drv.Warm(snap, 0)
	var connect Dist
	for range devtoolsSamples {
		if err := e.drv.WaitPool(ctx, snap.Name, 1); err != nil {
			return err
		}
		d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: snap.Name})
		if err != nil {
			return err
		}
		start := time.Now()
		err = devtoolsHandshake(ctx, base+"/v1/desktops/"+d.ID+"/cdp", token)
		took := time.Since(start)
		if derr := e.mgr.Delete(context.WithoutCancel(ctx), d.ID); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
		connect.Add(took)
	}
	e.res.dist("devtools_connect", &connect)
	e.progress("  DevTools after a create: connected and answered p50 %s", connect.Percentile(50))
	return e.playwrightConnect(ctx, snap, base, token)
}

//go:embed playwright_connect.mjs
var playwrightConnectScript []byte

// playwrightConnect times Playwright's own connectOverCDP after a create,
// which does far more than devtoolsHandshake (it attaches to every page and
// enables their domains), with Node and the playwright-core that
// scripts/setup installs in examples/playwright. Without them its key is
// null.
func (e *env) playwrightConnect(ctx context.Context, snap desktop.Snapshot, base, token string) error {
	const key = "playwright_connect_p50_ms"
	node, err := exec.LookPath("node")
	if err != nil {
		e.res.null(key, "no node on PATH (scripts/setup installs Node and playwright-core)")
		return nil
	}
	dir, err := filepath.Abs(e.opts.PlaywrightDir)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "playwright-core"))
	}
	if err != nil {
		e.res.null(key, fmt.Sprintf("no playwright-core in %s (scripts/setup runs npm ci there): %v", e.opts.PlaywrightDir, err))
		return nil
	}
	script := filepath.Join(e.runDir, "playwright_connect.mjs")
	if err := os.WriteFile(script, playwrightConnectScript, 0o644); err != nil {
		return err
	}
	defer os.Remove(script)
	run, err := startPlaywright(ctx, node, script, dir, snap.Name, base, token)
	if err != nil {
		return err
	}
	defer run.close()
	// One process for every sample, as a test suite's worker: its first
	// connect also loads Playwright's connection code, so it is kept apart.
	var connect Dist
	var first time.Duration
	for i := range devtoolsSamples + 1 {
		if err := e.drv.WaitPool(ctx, snap.Name, 1); err != nil {
			return err
		}
		took, err := run.sample(ctx, func(id string) error { return e.mgr.Delete(context.WithoutCancel(ctx), id) })
		if err != nil {
			return fmt.Errorf("playwright connectOverCDP: %w", err)
		}
		if i == 0 {
			first = took
			continue
		}
		connect.Add(took)
	}
	e.res.dist("playwright_connect", &connect)
	e.res.set("playwright_connect_first_ms", ms(first))
	e.progress("  Playwright connectOverCDP after a create: p50 %s (the process's first: %s)", connect.Percentile(50), first)
	return nil
}

// playwrightRun is the Node process of playwright_connect.mjs: a line on
// its stdin asks for a sample, it answers with lines of JSON.
type playwrightRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *lockedBuffer
	cancel context.CancelFunc
}

func startPlaywright(ctx context.Context, node, script, dir, snapshot, base, token string) (*playwrightRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "HOSTD_URL="+base, "HOSTD_TOKEN="+token, "SNAPSHOT="+snapshot, "PLAYWRIGHT_DIR="+dir)
	r := &playwrightRun{cmd: cmd, stderr: &lockedBuffer{}, cancel: cancel}
	cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start node: %w", err)
	}
	r.lines = bufio.NewScanner(out)
	return r, nil
}

// sample asks for one create and connect, and deletes the desktop made.
func (r *playwrightRun) sample(ctx context.Context, del func(id string) error) (time.Duration, error) {
	if _, err := io.WriteString(r.stdin, "sample\n"); err != nil {
		return 0, fmt.Errorf("node: %w: %s", err, r.stderrText())
	}
	// A sample that hangs is ended by killing the process.
	stop := context.AfterFunc(ctx, r.cancel)
	defer stop()
	timer := time.AfterFunc(2*time.Minute, r.cancel)
	defer timer.Stop()
	var id string
	for r.lines.Scan() {
		var l struct {
			ID        string   `json:"id"`
			ConnectMs *float64 `json:"connect_ms"`
		}
		if json.Unmarshal(r.lines.Bytes(), &l) != nil || l.ID == "" {
			continue
		}
		id = l.ID
		if l.ConnectMs == nil {
			continue
		}
		if err := del(id); err != nil {
			return 0, err
		}
		return time.Duration(*l.ConnectMs * float64(time.Millisecond)), nil
	}
	var err error
	if id != "" {
		err = del(id)
	}
	return 0, errors.Join(fmt.Errorf("node ended without a connect time: %s", r.stderrText()), err)
}

func (r *playwrightRun) stderrText() string {
	r.stderr.mu.Lock()
	defer r.stderr.mu.Unlock()
	return string(bytes.TrimSpace(r.stderr.buf.Bytes()))
}

// lockedBuffer is a process's stderr, read while the process still writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// close ends the process: stdin's end lets it leave, and a process that
// does not is killed.
func (r *playwrightRun) close() {
	r.stdin.Close()
	done := make(chan struct{})
	go func() {
		r.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.cancel()
		<-done
	}
	r.cancel()
}

// devtoolsHandshake does what a CDP client does first against a DevTools
// root: discovery, the browser's WebSocket, one command.
func devtoolsHandshake(ctx context.Context, root, token string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	auth := http.Header{"Authorization": {"Bearer " + token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/json/version", nil)
	if err != nil {
		return err
	}
	req.Header = auth.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/json/version: %s %s", root, resp.Status, body)
	}
	var version struct {
		WebSocket string `json:"webSocketDebuggerUrl"`
	}
	if err := json.Unmarshal(body, &version); err != nil || version.WebSocket == "" {
		return fmt.Errorf("%s/json/version: no browser socket in %s", root, body)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, version.WebSocket, auth)
	if err != nil {
		return fmt.Errorf("browser socket: %w", err)
	}
	defer ws.Close()
	if deadline, ok := ctx.Deadline(); ok {
		ws.SetReadDeadline(deadline)
	}
	if err := ws.WriteJSON(map[string]any{"id": 1, "method": "Browser.getVersion"}); err != nil {
		return err
	}
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := ws.ReadJSON(&msg); err != nil {
			return fmt.Errorf("Browser.getVersion: %w", err)
		}
		if msg.ID == 1 {
			if msg.Error != nil {
				return fmt.Errorf("Browser.getVersion: %s", msg.Error)
			}
			return nil
		}
	}
}
