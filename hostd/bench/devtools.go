package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	var connect Dist
	for range devtoolsSamples {
		if err := e.drv.WaitPool(ctx, snap.Name, 1); err != nil {
			return err
		}
		took, err := e.playwrightSample(ctx, node, script, dir, snap.Name, base, token)
		if err != nil {
			return fmt.Errorf("playwright connectOverCDP: %w", err)
		}
		connect.Add(took)
	}
	e.res.dist("playwright_connect", &connect)
	e.progress("  Playwright connectOverCDP after a create: p50 %s", connect.Percentile(50))
	return nil
}

// playwrightSample runs the script once and deletes the desktop it made.
func (e *env) playwrightSample(ctx context.Context, node, script, dir, snapshot, base, token string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "HOSTD_URL="+base, "HOSTD_TOKEN="+token, "SNAPSHOT="+snapshot, "PLAYWRIGHT_DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var id string
	var took time.Duration
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r struct {
			ID        string   `json:"id"`
			ConnectMs *float64 `json:"connect_ms"`
		}
		if json.Unmarshal(line, &r) == nil && r.ID != "" {
			id = r.ID
			if r.ConnectMs != nil {
				took = time.Duration(*r.ConnectMs * float64(time.Millisecond))
			}
		}
	}
	if id != "" {
		if err := e.mgr.Delete(context.WithoutCancel(ctx), id); err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return 0, fmt.Errorf("%w: %s", runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if took == 0 {
		return 0, fmt.Errorf("the script printed no connect time: %s", out)
	}
	return took, nil
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
