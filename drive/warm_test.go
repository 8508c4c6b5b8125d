package drive

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
// command, attaching one page on auto-attach as Chromium does; it records
// each command as "session method".
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
			if msg.Method == "Target.setAutoAttach" && strings.Contains(string(msg.Params), `"autoAttach":true`) {
				// Another target type first, which is not warmed.
				ws.WriteJSON(map[string]any{"method": "Target.attachedToTarget", "params": map[string]any{"sessionId": "w1", "targetInfo": map[string]string{"type": "service_worker"}}})
				ws.WriteJSON(map[string]any{"id": msg.ID, "result": map[string]any{}})
				ws.WriteJSON(map[string]any{"method": "Target.attachedToTarget", "params": map[string]any{"sessionId": "p1", "targetInfo": map[string]string{"type": "page"}}})
				continue
			}
			ws.WriteJSON(map[string]any{"id": msg.ID, "sessionId": msg.SessionID, "result": map[string]any{}})
		}
	})
	return mux
}

// The warm-up goes through discovery and the browser's socket, enables the
// domains on every page attached (even one announced after the attach's
// answer), and leaves nothing attached.
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
	if err := warmDevTools(ctx, dial); err != nil {
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
	if slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "w1 ") }) {
		t.Errorf("commands %q went to the service worker", got)
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
	err := warmDevTools(ctx, dial)
	if err == nil || !strings.Contains(err.Error(), "Browser.getVersion") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("warm-up against a refusing Chromium: %v, want the command and Chromium's message", err)
	}
}
