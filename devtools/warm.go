package devtools

import (
	"context"
	"fmt"
	"net"
)

// Warm takes a DevTools client's first steps, as Playwright's
// connectOverCDP does, each connection to Chromium's debugging port made by
// dial: discovery, the browser's socket, attaching to each page, enabling
// the domains Playwright enables there, detaching. Under TCG a guest runs
// every path slowly the first time, so hostd's warm pool does this ahead
// (drive.WarmPooled); nothing of it stays in the browser.
func Warm(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	c, err := Connect(ctx, dial, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Call(ctx, "", "Browser.getVersion", nil, nil); err != nil {
		return err
	}
	// Auto-attach, as Playwright asks for it; the pages are then attached
	// one by one, which answers with their sessions (auto-attach's events
	// may come later than any answer).
	if err := c.Call(ctx, "", "Target.setAutoAttach", map[string]any{"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}, nil); err != nil {
		return err
	}
	var targets struct {
		Infos []struct {
			ID   string `json:"targetId"`
			Type string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := c.Call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		return err
	}
	for _, t := range targets.Infos {
		if t.Type != "page" {
			continue
		}
		var attached struct {
			SessionID string `json:"sessionId"`
		}
		if err := c.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.ID, "flatten": true}, &attached); err != nil {
			return err
		}
		if attached.SessionID == "" {
			return fmt.Errorf("Target.attachToTarget: no session for target %s", t.ID)
		}
		if err := warmPage(ctx, c, attached.SessionID); err != nil {
			return err
		}
		if err := c.Call(ctx, "", "Target.detachFromTarget", map[string]any{"sessionId": attached.SessionID}, nil); err != nil {
			return err
		}
	}
	// Closing the socket detaches whatever auto-attach attached.
	return c.Call(ctx, "", "Target.setAutoAttach", map[string]any{"autoAttach": false, "waitForDebuggerOnStart": false, "flatten": true}, nil)
}

// warmPage is what Playwright does on a page it attaches to: the domains
// it enables and the scripts it adds, all of which end with the session
// (not the isolated world it creates: a world cannot be removed, and the
// page would keep it).
func warmPage(ctx context.Context, c *Client, session string) error {
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
		if err := c.Call(ctx, session, m.method, m.params, nil); err != nil {
			return err
		}
	}
	return nil
}
