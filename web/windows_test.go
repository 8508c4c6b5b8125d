package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
)

// The window and accessibility routes on the fake guest: answers in the
// declared display's space, and every bad request named by its field
// before anything reaches the guest.
func TestWindowRequests(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("GET", h.path("/windows?display_width=640&display_height=400"), "")
	var wins api.Windows
	if status != http.StatusOK || json.Unmarshal(body, &wins) != nil || len(wins.Windows) != 1 {
		t.Fatalf("list: %d %s", status, body)
	}
	if w := wins.Windows[0]; w.ID != "0x01c0000d" || w.Class != "XTerm" || w.Instance != "xterm" || !w.Focused || w.X != 20 || w.Y != 30 {
		t.Errorf("the fake's xterm at 640x400: %+v", w)
	}
	status, body = h.do("POST", h.path("/windows/0x1c0000d/move"), `{"x": 100, "y": 50, "display_width": 640, "display_height": 400}`)
	var moved api.Window
	if status != http.StatusOK || json.Unmarshal(body, &moved) != nil || moved.X != 100 || moved.Y != 50 || moved.ID != "0x01c0000d" {
		t.Errorf("move at 640x400: %d %s", status, body)
	}
	// Like input, operations wait for a person to hand control back;
	// the list does not.
	if status, body := h.do("POST", h.path("/control"), `{"holder":"person","by":"ana"}`); status != http.StatusOK {
		t.Fatalf("take control: %d %s", status, body)
	}
	if status, body := h.do("POST", h.path("/windows/0x01c0000d/focus"), ""); status != http.StatusConflict || !strings.Contains(string(body), "person_in_control") {
		t.Errorf("focus while a person holds control: %d %s", status, body)
	}
	if status, body := h.do("GET", h.path("/windows"), ""); status != http.StatusOK {
		t.Errorf("list while a person holds control: %d %s", status, body)
	}
	if status, body := h.do("POST", h.path("/control"), `{"holder":"agent"}`); status != http.StatusOK {
		t.Fatalf("hand control back: %d %s", status, body)
	}
	status, body = h.do("POST", h.path("/windows/0x01c0000d/close"), "")
	if status != http.StatusOK || string(body) != `{"id":"0x01c0000d","closed":true}` {
		t.Errorf("close: %d %s", status, body)
	}

	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"GET", "/windows?display_width=640", "", 400, "display_height"},
		{"POST", "/windows/0x01c0000d/move", `{"x": 1}`, 400, "y"},
		{"POST", "/windows/0x01c0000d/move", `{"x": 1, "y": 1, "width": 5}`, 400, "width"},
		{"POST", "/windows/0x01c0000d/resize", `{"x": 1, "width": 5, "height": 5}`, 400, "x"},
		{"POST", "/windows/0x01c0000d/resize", `{"width": 0, "height": 5}`, 400, "width"},
		{"POST", "/windows/0x01c0000d/move", `{"x": 1, "y": 1, "z": 1}`, 400, ""},
		{"POST", "/windows/xterm/focus", "", 400, "window"},
		{"POST", "/windows/0x01c0000d/focus", "", 404, ""}, // closed above
		{"POST", "/windows/0x01c0000d/maximize", "", 404, ""},
		{"GET", "/accessibility?scope=window", "", 400, "scope"},
		{"GET", "/accessibility?max_nodes=many", "", 400, "max_nodes"},
		{"GET", "/accessibility?max_depth=0", "", 409, ""}, // 0 is the default; the fake has no walker
		{"GET", "/accessibility?max_depth=201", "", 400, "max_depth"},
		{"GET", "/accessibility?hidden=maybe", "", 400, "hidden"},
		{"GET", "/accessibility", "", 409, ""},
	} {
		status, body := h.do(c.method, h.path(c.path), c.body)
		if status != c.status {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, status, body, c.status)
			continue
		}
		if c.field != "" {
			if _, field, _, _ := actError(t, body); field != c.field {
				t.Errorf("%s %s %s: field %q, want %q (%s)", c.method, c.path, c.body, field, c.field, body)
			}
		}
	}
}
