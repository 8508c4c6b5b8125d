package devtools_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/devtools"
)

// browserSocket answers DevTools commands as Chromium does: an event
// first for every command, then the answer by id; "Fail" is answered
// with an error and "Hang" never.
func browserSocket(t *testing.T) *websocket.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			var in struct {
				ID        int64  `json:"id"`
				Method    string `json:"method"`
				SessionID string `json:"sessionId"`
			}
			if ws.ReadJSON(&in) != nil {
				return
			}
			ws.WriteJSON(map[string]any{"method": "Test.before", "params": map[string]any{"of": in.Method}, "sessionId": in.SessionID})
			switch in.Method {
			case "Hang":
			case "Fail":
				ws.WriteJSON(map[string]any{"id": in.ID, "error": map[string]any{"code": -32000, "message": "no such thing"}})
			default:
				ws.WriteJSON(map[string]any{"id": in.ID, "result": map[string]any{"method": in.Method, "session": in.SessionID}})
			}
		}
	}))
	t.Cleanup(srv.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestClientCallsAndEvents(t *testing.T) {
	events := make(chan devtools.Event, 10)
	c := devtools.NewClient(browserSocket(t), func(ev devtools.Event) {
		select { // the handler must not block
		case events <- ev:
		default:
		}
	})
	defer c.Close()
	ctx := context.Background()
	var res struct{ Method, Session string }
	if err := c.Call(ctx, "S1", "Page.enable", nil, &res); err != nil || res.Method != "Page.enable" || res.Session != "S1" {
		t.Fatalf("Call: %+v %v", res, err)
	}
	if ev := <-events; ev.Method != "Test.before" || ev.Session != "S1" || !strings.Contains(string(ev.Params), "Page.enable") {
		t.Errorf("event %+v", ev)
	}
	err := c.Call(ctx, "", "Fail", nil, nil)
	var ce *devtools.CommandError
	if !errors.As(err, &ce) || ce.Method != "Fail" || ce.Code != -32000 || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("a failed command: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := c.Call(short, "", "Hang", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an unanswered command: %v", err)
	}
	// Calls at once each get their own answer.
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			var r struct{ Session string }
			want := string(rune('a' + i))
			err := c.Call(ctx, want, "X", nil, &r)
			if err == nil && r.Session != want {
				err = errors.New("answer " + r.Session + " for " + want)
			}
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	c.Close()
	<-c.Done()
	if err := c.Call(ctx, "", "X", nil, nil); !errors.Is(err, devtools.ErrClosed) {
		t.Errorf("a call after Close: %v", err)
	}
}
