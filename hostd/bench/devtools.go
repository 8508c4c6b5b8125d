package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/desktop"
)

// devtoolsSamples is the number of fresh browser desktops the DevTools
// connection is timed on.
const devtoolsSamples = 5

// devtoolsSuite measures how soon a browser test can start on a new
// desktop: from the create returning to a DevTools client having the
// browser's version through hostd, which is what Playwright's
// connectOverCDP does first (GET /json/version, open the browser's
// WebSocket, Browser.getVersion). It needs the browser snapshot.
func (e *env) devtoolsSuite(ctx context.Context, base, token string) error {
	snap, ok, err := e.browserSnapshot("devtools_connect_p50_ms")
	if !ok || err != nil {
		return err
	}
	var connect Dist
	for range devtoolsSamples {
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
	return nil
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
