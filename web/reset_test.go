package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
)

func TestResetKeepsTheDesktopAndTakesAClock(t *testing.T) {
	h := newActHarness(t)
	before := h.f.Machine(t)

	code, body := h.do(http.MethodPost, h.path("/reset"), `{"clock":"2031-05-06T07:08:09Z"}`)
	if code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, body)
	}
	var d api.Desktop
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	if d.ID != h.id || d.State != "running" || d.Resets != 1 || d.ResetAt == nil || d.Clock == nil || !d.Clock.Equal(want) {
		t.Fatalf("after reset: %s", body)
	}
	if d.URLs.Self != "/v1/desktops/"+h.id {
		t.Errorf("urls changed: %+v", d.URLs)
	}
	// The guest's clock offset makes it about the asked-for time.
	if guest := time.Now().Add(time.Duration(d.ClockOffsetS * float64(time.Second))); guest.Sub(want).Abs() > time.Minute {
		t.Errorf("clock_offset_s %.0f makes the guest's clock %s", d.ClockOffsetS, guest)
	}
	if h.f.Machine(t) == before {
		t.Fatal("the desktop kept its machine")
	}

	// Input goes to the new machine: the drive service forgot the old one.
	if code, body := h.do(http.MethodPost, h.path("/actions"), `{"actions":[{"action":"key","chord":"Return"}]}`); code != http.StatusOK {
		t.Fatalf("key after reset: %d %s", code, body)
	}
	if len(h.f.Machine(t).Inputs()) == 0 {
		t.Error("the new machine received no input")
	}
}

func TestResetRefusals(t *testing.T) {
	h := newActHarness(t)
	for _, tc := range []struct{ body, want string }{
		{`{"clock":"1900-01-01T00:00:00Z"}`, "clock"},
		{`{"clock":"yesterday"}`, "malformed JSON body"},
		{`{"clok":"2031-01-01T00:00:00Z"}`, "clok"},
	} {
		code, body := h.do(http.MethodPost, h.path("/reset"), tc.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("reset %s: %d %s, want 400 naming %q", tc.body, code, body, tc.want)
		}
	}
	if code, body := h.do(http.MethodPost, h.path("/control"), `{"holder":"person","by":"ana"}`); code != http.StatusOK {
		t.Fatalf("take control: %d %s", code, body)
	}
	code, body := h.do(http.MethodPost, h.path("/reset"), "")
	if errCode, _, _, msg := actError(t, body); code != http.StatusConflict || errCode != "person_in_control" || !strings.Contains(msg, "ana") {
		t.Errorf("reset while a person holds control: %d %s", code, body)
	}
	d, err := h.mgr.Get(h.id)
	if err != nil || d.Resets != 0 || d.State != "running" {
		t.Errorf("a refused reset changed the desktop: %+v %v", d, err)
	}
	if code, body := h.do(http.MethodPost, "/v1/desktops/d-nope/reset", ""); code != http.StatusNotFound {
		t.Errorf("reset of an unknown desktop: %d %s", code, body)
	}
}
