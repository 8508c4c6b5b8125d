package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/internal/testenv"
)

// On a desktop of the browser image, Gemini's navigate opens the page
// (through Chromium's DevTools), and each response carries the URL of the
// page Chromium shows, as Google's reference client returns its page's
// url, and its call's id. Typed into the address bar, the URL's first keys
// went to the page under TCG and Chromium searched for the rest.
func TestGeminiBrowserURL(t *testing.T) {
	s := startStackOn(t, "browser")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out struct {
		Parts []struct {
			FunctionResponse struct {
				ID       string         `json:"id"`
				Response map[string]any `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	}
	start := time.Now()
	turn := json.RawMessage(`{"role": "model", "parts": [
	  {"functionCall": {"id": "fc_nav", "name": "navigate", "args": {"url": "chrome://version"}}},
	  {"functionCall": {"id": "fc_shot", "name": "take_screenshot", "args": {}}}]}`)
	if err := s.api.Do(ctx, "POST", "/v1/desktops/"+s.desktop.ID+"/computer/gemini", turn, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("turn answered in %s", time.Since(start).Round(time.Millisecond))
	if len(out.Parts) != 2 {
		t.Fatalf("%d responses: %+v", len(out.Parts), out)
	}
	for i, id := range []string{"fc_nav", "fc_shot"} {
		r := out.Parts[i].FunctionResponse
		if r.ID != id || r.Response["error"] != nil || r.Response["url"] != "chrome://version/" {
			t.Errorf("response %d: id %q, %v; want %s with url chrome://version/", i, r.ID, r.Response, id)
		}
	}
	// The navigation answers once the page commits; its title comes with
	// its load, on the guest's time.
	var title string
	testenv.Poll(30*time.Second, 200*time.Millisecond, 2*time.Second, func() bool {
		title = s.shell(t, "xdotool search --onlyvisible --class chromium getwindowname 2>/dev/null | head -1")
		return title == "About Version - Chromium"
	})
	if title != "About Version - Chromium" {
		t.Errorf("Chromium's window is %q", title)
	}
}
