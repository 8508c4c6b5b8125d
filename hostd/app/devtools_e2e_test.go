package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/netpolicy"
)

// Browser testing over DevTools: chromedp drives the Chromium of a browser
// desktop whose network policy is none, through hostd and the guest's
// DevTools bridge, and what it does shows in the desktop itself.
func TestDevToolsDrivesTheDesktopsChromium(t *testing.T) {
	s := startStackWith(t, images.FlavorBrowser, 0)
	ctx := s.ctx(t)
	d, err := s.c.Desktop(ctx, s.id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Network.Mode != string(netpolicy.None) {
		t.Fatalf("the desktop's network is %q: this test wants none", d.Network.Mode)
	}

	// Discovery with the daemon's token in a header: every WebSocket URL
	// comes back through hostd.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/desktops/"+s.id+"/cdp/json/list", nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/cdp/json/list: %s %s", resp.Status, body)
	}
	var targets []struct {
		Title, Type, WebSocketDebuggerURL string
	}
	if err := json.Unmarshal(body, &targets); err != nil {
		t.Fatalf("/cdp/json/list: %v\n%s", err, body)
	}
	wsBase := "ws" + strings.TrimPrefix(s.url, "http") + "/v1/desktops/" + s.id + "/cdp/devtools/page/"
	var start bool
	for _, tg := range targets {
		if tg.Type == "page" && strings.HasPrefix(tg.Title, "warmdesk start page") {
			start = true
			if !strings.HasPrefix(tg.WebSocketDebuggerURL, wsBase) {
				t.Errorf("the start page's socket %q is not under %s", tg.WebSocketDebuggerURL, wsBase)
			}
		}
	}
	if !start {
		t.Fatalf("no start page among the targets:\n%s", body)
	}

	// chromedp with a short-lived URL: it cannot send headers.
	u, err := s.c.DevToolsURL(ctx, s.id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(u.WebSocket, e2eToken) || !strings.HasPrefix(u.WebSocket, "ws://") {
		t.Fatalf("websocket URL %q", u.WebSocket)
	}
	start0 := time.Now()
	actx, cancelAlloc := remote.NewAllocator(ctx, u.WebSocket, remote.NoModifyURL)
	defer cancelAlloc()
	cctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	title := fmt.Sprintf("devtools %d", time.Now().UnixNano()%100000)
	page := "data:text/html," + strings.ReplaceAll(`<title>`+title+`</title><input id=q autofocus><button id=go onclick="document.title='sent: '+q.value">Go</button>`, " ", "%20")
	err = chromedp.Do(cctx,
		chromedp.Navigate(page),
		chromedp.SendKeys(chromedp.ID("q"), "typed over CDP"),
		chromedp.Click(chromedp.ID("go")),
	)
	if err != nil {
		t.Fatalf("chromedp: %v", err)
	}
	got, err := chromedp.Run(cctx, chromedp.Title())
	if err != nil {
		t.Fatalf("chromedp: %v", err)
	}
	t.Logf("chromedp connected, navigated, typed and clicked in %s", time.Since(start0).Round(time.Millisecond))
	if got != "sent: typed over CDP" {
		t.Errorf("page title %q after the click", got)
	}
	// The tab chromedp opened is a window of the desktop's own Chromium.
	found := testenv.Poll(30*time.Second, 200*time.Millisecond, 2*time.Second, func() bool {
		res, err := s.c.Exec(ctx, s.id, api.ExecRequest{Shell: "DISPLAY=:0 xdotool search --name '^sent: typed over CDP' getwindowname %@", Timeout: api.Duration(10 * time.Second)})
		return err == nil && res.ExitCode == 0
	})
	if !found {
		t.Error("no window of the desktop's Chromium shows the page chromedp drove")
	}
	cancelTab()
	cancelAlloc()

	// And with the token in a header, the browser socket from discovery.
	var version struct {
		WebSocketDebuggerURL string
	}
	if err := s.c.Do(ctx, http.MethodGet, "/v1/desktops/"+s.id+"/cdp/json/version", nil, &version); err != nil {
		t.Fatal(err)
	}
	hctx, cancelHeader := remote.NewAllocator(ctx, version.WebSocketDebuggerURL, remote.NoModifyURL,
		remote.WithDialHTTPHeader(http.Header{"Authorization": {"Bearer " + e2eToken}}))
	defer cancelHeader()
	hctx, cancelHeaderTab := chromedp.NewContext(hctx)
	defer cancelHeaderTab()
	if sum, err := chromedp.Run(hctx, chromedp.Evaluate[int](`6 * 7`)); err != nil || sum != 42 {
		t.Errorf("chromedp with a header: %d, %v", sum, err)
	}
	cancelHeaderTab()

	// A reset closes a DevTools connection saying why, and brings back the
	// snapshot's Chromium: the start page, without the page driven above.
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, version.WebSocketDebuggerURL, http.Header{"Authorization": {"Bearer " + e2eToken}})
	if err != nil {
		t.Fatalf("browser socket: %v", err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"id": 1, "method": "Browser.getVersion"}); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.Contains(string(msg), `"id":1`) {
		t.Fatalf("Browser.getVersion: %s %v", msg, err)
	}
	reset, err := s.c.Reset(ctx, s.id, api.Reset{})
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if reset.ID != s.id || reset.Resets != 1 {
		t.Fatalf("after reset: %+v", reset)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err = ws.ReadMessage()
	var closed *websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != websocket.CloseGoingAway || !strings.Contains(closed.Text, "was reset") {
		t.Errorf("the DevTools socket after a reset: %v, want close 1001 saying the desktop was reset", err)
	}
	var after []struct{ Title, Type string }
	if err := s.c.Do(ctx, http.MethodGet, "/v1/desktops/"+s.id+"/cdp/json/list", nil, &after); err != nil {
		t.Fatalf("/cdp/json/list after the reset: %v", err)
	}
	var titles []string
	for _, tg := range after {
		if tg.Type == "page" {
			titles = append(titles, tg.Title)
		}
	}
	if len(titles) != 1 || !strings.HasPrefix(titles[0], "warmdesk start page") {
		t.Errorf("pages after the reset: %q, want only the start page", titles)
	}

	// A view token may not reach DevTools.
	var issued api.IssuedToken
	if err := s.c.Do(ctx, http.MethodPost, "/v1/desktops/"+s.id+"/tokens", api.IssueToken{Role: "view"}, &issued); err != nil {
		t.Fatal(err)
	}
	tok := issued.Token
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/desktops/"+s.id+"/cdp/json/version", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a view token on /cdp: %s, want 403", resp.Status)
	}
}
