package devtools

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// cdpStandIn serves /json/version and a browser socket that answers every
// command, with one page and one service worker among its targets; it
// records each command as "session method".
type cdpStandIn struct {
	mu       sync.Mutex
	commands []string
}

func (c *cdpStandIn) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/json/version", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"webSocketDebuggerUrl": "ws://" + r.Host + "/devtools/browser/b1"})
	})
	mux.HandleFunc("/devtools/browser/b1", func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer ws.Close()
		for {
			var msg struct {
				ID        int             `json:"id"`
				Method    string          `json:"method"`
				SessionID string          `json:"sessionId"`
				Params    json.RawMessage `json:"params"`
			}
			if ws.ReadJSON(&msg) != nil {
				return
			}
			c.mu.Lock()
			c.commands = append(c.commands, strings.TrimSpace(msg.SessionID+" "+msg.Method))
			c.mu.Unlock()
			result := map[string]any{}
			switch msg.Method {
			case "Target.setAutoAttach":
				if strings.Contains(string(msg.Params), `"autoAttach":true`) {
					// Chromium's events for what auto-attach attached.
					ws.WriteJSON(map[string]any{"method": "Target.attachedToTarget", "params": map[string]any{"sessionId": "a1", "targetInfo": map[string]string{"type": "page"}}})
				}
			case "Target.getTargets":
				result["targetInfos"] = []map[string]string{{"targetId": "T1", "type": "page"}, {"targetId": "W1", "type": "service_worker"}}
			case "Target.attachToTarget":
				if !strings.Contains(string(msg.Params), `"targetId":"T1"`) {
					t.Errorf("attached to %s, want only the page T1", msg.Params)
				}
				result["sessionId"] = "p1"
			}
			ws.WriteJSON(map[string]any{"id": msg.ID, "sessionId": msg.SessionID, "result": result})
		}
	})
	return mux
}

// The warm-up goes through discovery and the browser's socket, attaches to
// every page (not other targets), enables the domains Playwright enables
// there, and leaves nothing attached.
func TestWarmDevToolsAttachesEnablesAndDetaches(t *testing.T) {
	standIn := &cdpStandIn{}
	srv := httptest.NewServer(standIn.handler(t))
	defer srv.Close()
	var dials int
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Warm(ctx, dial); err != nil {
		t.Fatal(err)
	}
	if dials != 2 {
		t.Errorf("%d connections to Chromium's port, want 2 (discovery, the browser's socket)", dials)
	}
	standIn.mu.Lock()
	got := standIn.commands
	standIn.mu.Unlock()
	for _, want := range []string{"p1 Page.enable", "p1 Runtime.enable", "p1 Network.enable", "Target.detachFromTarget"} {
		if !slices.Contains(got, want) {
			t.Errorf("commands %q lack %q", got, want)
		}
	}
	if slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "a1 ") || strings.Contains(c, "createIsolatedWorld") }) {
		t.Errorf("commands %q: none may go to an auto-attached session or leave a world behind", got)
	}
	if last := got[len(got)-1]; last != "Target.setAutoAttach" {
		t.Errorf("last command %q, want auto-attach turned off", last)
	}
}

// A command Chromium refuses ends the warm-up with its error.
func TestWarmDevToolsSaysWhatChromiumRefused(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/json/version", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"webSocketDebuggerUrl": "ws://" + r.Host + "/b"})
	})
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		var msg struct {
			ID int `json:"id"`
		}
		ws.ReadJSON(&msg)
		ws.WriteJSON(map[string]any{"id": msg.ID, "error": map[string]any{"code": -32601, "message": "nope"}})
		ws.ReadJSON(&msg)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Warm(ctx, dial)
	if err == nil || !strings.Contains(err.Error(), "Browser.getVersion") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("warm-up against a refusing Chromium: %v, want the command and Chromium's message", err)
	}
}
