package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/e2b"
)

// getCursorPosition after a move: X takes the tablet's report on its own
// time, so the SDK's `xdotool getmouselocation` waits until X's pointer is
// where the move put it, and answers X's own words.
func TestCursorReadWaitsForTheMove(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	reads := 0
	h.f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		cmd := strings.Join(c.Args, " ")
		if strings.Contains(cmd, "getent passwd") {
			return desktoptest.GuestResult{Stdout: rootPasswd}, nil
		}
		if !strings.Contains(cmd, "xdotool getmouselocation") {
			return desktoptest.GuestResult{}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		// X lags two reads behind the move.
		if reads++; reads <= 2 {
			return desktoptest.GuestResult{Stdout: []byte("x:320 y:220 screen:0 window:4194318\n")}, nil
		}
		return desktoptest.GuestResult{Stdout: []byte("x:140 y:130 screen:0 window:4194318\n")}, nil
	}
	tok := e2b.AccessToken(daemonToken, h.f.ID)
	run := func(line string) string {
		t.Helper()
		msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", line}}})
		st, _, body := h.do("POST", "/process.Process/Start", string([]byte{0, 0, 0, byte(len(msg) >> 8), byte(len(msg))})+string(msg),
			"E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok, "Content-Type", "application/connect+json")
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", line, st, body)
		}
		return body
	}
	run("xdotool mousemove 140 130")
	body := run("xdotool getmouselocation")
	// The streamed stdout is base64 in E2B's protocol.
	if want := "eDoxNDAgeToxMzA"; !strings.Contains(body, want) {
		t.Fatalf("the cursor read answered before X took the move: %q", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads < 3 {
		t.Fatalf("X was read %d times, want until it caught up", reads)
	}
}
