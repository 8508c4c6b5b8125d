package devtools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gorilla/websocket"
)

// Warm takes a DevTools client's first steps, as Playwright's
// connectOverCDP does, each connection to Chromium's debugging port made by
// dial: discovery, the browser's socket, attaching to each page, enabling
// the domains Playwright enables there, detaching. Under TCG a guest runs
// every path slowly the first time, so hostd's warm pool does this ahead
// (drive.WarmPooled); nothing of it stays in the browser.
func Warm(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/json/version", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("/json/version: %w", err)
	}
	var version struct {
		WebSocket string `json:"webSocketDebuggerUrl"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&version)
	resp.Body.Close()
	if err != nil || version.WebSocket == "" {
		return fmt.Errorf("/json/version: no browser socket (%v)", err)
	}
	ws, _, err := (&websocket.Dialer{NetDialContext: dial}).DialContext(ctx, version.WebSocket, nil)
	if err != nil {
		return fmt.Errorf("the browser's socket: %w", err)
	}
	defer ws.Close()
	if deadline, ok := ctx.Deadline(); ok {
		ws.SetReadDeadline(deadline)
	}
	c := &cdpConn{ws: ws}
	if err := c.call("", "Browser.getVersion", nil); err != nil {
		return err
	}
	// Auto-attach, as Playwright asks for it; the pages are then attached
	// one by one, which answers with their sessions (auto-attach's events
	// may come later than any answer).
	if err := c.call("", "Target.setAutoAttach", map[string]any{"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}); err != nil {
		return err
	}
	if err := c.call("", "Target.getTargets", nil); err != nil {
		return err
	}
	var targets struct {
		Infos []struct {
			ID   string `json:"targetId"`
			Type string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := json.Unmarshal(c.result, &targets); err != nil {
		return fmt.Errorf("Target.getTargets: %w", err)
	}
	for _, t := range targets.Infos {
		if t.Type != "page" {
			continue
		}
		if err := c.call("", "Target.attachToTarget", map[string]any{"targetId": t.ID, "flatten": true}); err != nil {
			return err
		}
		var attached struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(c.result, &attached); err != nil || attached.SessionID == "" {
			return fmt.Errorf("Target.attachToTarget: no session in %.200s", c.result)
		}
		if err := warmPage(c, attached.SessionID); err != nil {
			return err
		}
		if err := c.call("", "Target.detachFromTarget", map[string]any{"sessionId": attached.SessionID}); err != nil {
			return err
		}
	}
	// Closing the socket detaches whatever auto-attach attached.
	return c.call("", "Target.setAutoAttach", map[string]any{"autoAttach": false, "waitForDebuggerOnStart": false, "flatten": true})
}

// warmPage is what Playwright does on a page it attaches to: the domains
// it enables and the scripts it adds, all of which end with the session
// (not the isolated world it creates: a world cannot be removed, and the
// page would keep it).
func warmPage(c *cdpConn, session string) error {
	for _, m := range []struct {
		method string
		params any
	}{
		{"Page.enable", nil},
		{"Page.getFrameTree", nil},
		{"Log.enable", nil},
		{"Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}},
		{"Runtime.enable", nil},
		{"Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": ""}},
		{"Network.enable", nil},
		{"Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true}},
		{"Emulation.setEmulatedMedia", map[string]any{"media": "", "features": []map[string]string{{"name": "prefers-color-scheme", "value": "light"}, {"name": "prefers-reduced-motion", "value": "no-preference"}, {"name": "forced-colors", "value": "none"}, {"name": "prefers-contrast", "value": "no-preference"}}}},
		{"Inspector.enable", nil},
		{"Runtime.runIfWaitingForDebugger", nil},
	} {
		if err := c.call(session, m.method, m.params); err != nil {
			return err
		}
	}
	return nil
}

// cdpConn sends one DevTools command at a time; events are skipped.
type cdpConn struct {
	ws *websocket.Conn
	id int
	// result is the last command's answer.
	result json.RawMessage
}

// call sends a command (on a page session, or the browser's when session
// is empty) and waits for its answer.
func (c *cdpConn) call(session, method string, params any) error {
	c.id++
	msg := map[string]any{"id": c.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	if err := c.ws.WriteJSON(msg); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	for {
		var in struct {
			ID     int             `json:"id"`
			Error  json.RawMessage `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		if err := c.ws.ReadJSON(&in); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if in.ID == c.id {
			if len(in.Error) > 0 {
				return fmt.Errorf("%s: %s", method, in.Error)
			}
			c.result = in.Result
			return nil
		}
	}
}
