package web_test

import (
	"context"
	"encoding/json"
	"image/color"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

// controlConn is an agent's end of the control WebSocket.
type controlConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func (h *actHarness) control(t *testing.T) *controlConn {
	t.Helper()
	return h.controlAs(t, actToken)
}

// controlAs opens the control WebSocket with a token.
func (h *actHarness) controlAs(t *testing.T, token string) *controlConn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(h.srv.URL, "http") + h.path("/control")
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	d := websocket.Dialer{Subprotocols: []string{"warmdesk.v1"}}
	ws, resp, err := d.Dial(url, hdr)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != "warmdesk.v1" {
		t.Errorf("subprotocol %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	t.Cleanup(func() { ws.Close() })
	return &controlConn{t: t, ws: ws}
}

func (c *controlConn) send(msg string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message that is not a screen event.
func (c *controlConn) next() api.ControlReply {
	c.t.Helper()
	for {
		c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var m api.ControlReply
		if err := c.ws.ReadJSON(&m); err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if m.Type != "screen.changed" {
			return m
		}
	}
}

func TestControlSocketPipelines(t *testing.T) {
	h := newActHarness(t)
	c := h.control(t)
	if m := c.next(); m.Type != "hello" || m.Desktop == nil || m.Desktop.ID != h.id {
		t.Fatalf("first message %+v, want hello with the desktop", m)
	}
	// Three batches sent at once answer in order, each by its id.
	c.send(`{"id": "a", "type": "actions", "actions": [{"action": "move", "x": 1, "y": 1}]}`)
	c.send(`{"id": "b", "type": "actions", "actions": [{"action": "move", "x": 2, "y": 2}, {"action": "cursor_position"}]}`)
	c.send(`{"id": "c", "type": "actions", "actions": [{"action": "screenshot"}], "settle_ms": 0}`)
	c.send(`{"id": "p", "type": "ping"}`)
	got := map[string]api.ControlReply{}
	var order []string
	for len(got) < 4 {
		m := c.next()
		got[m.ID] = m
		order = append(order, m.ID)
	}
	if batches := strings.ReplaceAll(strings.Join(order, ""), "p", ""); batches != "abc" {
		t.Errorf("answers in order %v: batches must answer in the order sent", order)
	}
	var b api.ActionsResponse
	if err := json.Unmarshal(got["b"].Result, &b); err != nil || got["b"].Type != "result" {
		t.Fatalf("b: %+v %v", got["b"], err)
	}
	if b.Results[1].Cursor == nil || *b.Results[1].Cursor != (api.Point{X: 2, Y: 2}) {
		t.Errorf("b cursor %+v", b.Results[1].Cursor)
	}
	var cres api.ActionsResponse
	json.Unmarshal(got["c"].Result, &cres)
	if cres.Screenshot == nil || len(cres.Screenshot.Data) == 0 {
		t.Errorf("c has no screenshot")
	}
	if got["p"].Type != "pong" {
		t.Errorf("ping answered %+v", got["p"])
	}
	if n := len(h.frames()); n != 2 {
		t.Errorf("%d frames, want 2 moves", n)
	}
}

func TestControlSocketErrorsAndEvents(t *testing.T) {
	h := newActHarness(t)
	c := h.control(t)
	c.next() // hello
	cases := []struct {
		msg, id, field string
		status         int
	}{
		{`{"id": "1", "type": "actions", "actions": [{"action": "fly"}]}`, "1", "actions[0].action", 400},
		{`{"id": "2", "type": "actions", "actions": [{"action": "click", "x": 5000, "y": 1}]}`, "2", "actions[0].x", 400},
		{`{"id": "3", "type": "dance"}`, "3", "type", 400},
		{`{"type": "actions", "actions": [{"action": "screenshot"}]}`, "", "id", 400},
		{`{"id": "4", "type": "exec", "cwd": "x", "cmd": "ls"}`, "4", "cwd", 400},
		{`not json`, "", "", 400},
	}
	for _, tc := range cases {
		c.send(tc.msg)
		m := c.next()
		if m.Type != "error" || m.ID != tc.id || m.Status != tc.status || m.Error == nil || m.Error.Field != tc.field {
			t.Errorf("%s: answered %+v (error %+v)", tc.msg, m, m.Error)
		}
	}
	if n := len(h.frames()); n != 0 {
		t.Errorf("%d frames from rejected messages", n)
	}

	// A person taking over is an event, and input is then refused.
	if _, err := h.mgr.SetControl(h.id, desktop.ControlPerson, "ada"); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m.Type != string(desktop.EventControl) || m.Desktop.Control.Holder != "person" {
		t.Errorf("event %+v, want desktop.control to a person", m)
	}
	c.send(`{"id": "5", "type": "actions", "actions": [{"action": "move", "x": 1, "y": 1}]}`)
	if m := c.next(); m.Type != "error" || m.Status != http.StatusConflict || m.Error.Code != "person_in_control" {
		t.Errorf("input during person control: %+v %+v", m, m.Error)
	}

	// The screen changing is an event too. The bound is generous: in CI,
	// with -race and QEMU suites on both cores, 5 s once passed without it.
	h.paint(color.Black)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.ws.SetReadDeadline(deadline)
		var m api.ControlReply
		if err := c.ws.ReadJSON(&m); err != nil {
			t.Fatalf("no screen.changed event: %v", err)
		}
		if m.Type == "screen.changed" && m.Counter == h.src.Counter() {
			break
		}
	}
}

func TestControlSocketStreamsExec(t *testing.T) {
	h := newActHarness(t)
	h.guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		return desktoptest.GuestResult{Stdout: []byte("one\ntwo\n"), Stderr: []byte("oops\n")}, nil
	}
	c := h.control(t)
	c.next()
	c.send(`{"id": "x", "type": "exec", "shell": "echo one; echo oops >&2; echo two", "stream": true}`)
	chunks := map[string]string{}
	for {
		m := c.next()
		if m.ID == "" && strings.HasPrefix(m.Type, "desktop.") {
			continue // the desktop's events (the exec's own among them) come on the socket too
		}
		if m.ID != "x" {
			t.Fatalf("message %+v", m)
		}
		if m.Type == "exec.output" {
			chunks[m.Stream] += m.Data
			continue
		}
		if m.Type != "result" {
			t.Fatalf("ended with %+v %+v", m, m.Error)
		}
		var r api.ExecResponse
		if err := json.Unmarshal(m.Result, &r); err != nil || r.ExitCode != 0 {
			t.Errorf("result %s: %v", m.Result, err)
		}
		break
	}
	if chunks["stdout"] != "one\ntwo\n" || chunks["stderr"] != "oops\n" {
		t.Errorf("streamed %q", chunks)
	}
}
