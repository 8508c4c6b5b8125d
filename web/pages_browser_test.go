package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/web"
)

// TestBrowser drives the dashboard and the viewer in real Chromium against
// a real desktop (the minimal snapshot: openbox and a focused xterm at the
// top left, background #25303b). The steps build on one another: the
// view-only viewer's input is proved absent by the later controlling
// viewer's input, which reaches the desktop after it.
func TestBrowser(t *testing.T) {
	testenv.SkipShort(t)
	testenv.Require(t, "chromium")
	requireNoVNC(t)
	start := time.Now()
	s := startStack(t)
	b := startBrowser(t)
	id := s.desktop.ID
	t.Logf("stack and browser ready in %s", time.Since(start).Round(time.Millisecond))
	// Known places on the guest's screen: the root window, away from the
	// xterm (which covers about 40..930 x 40..560), and a point in it.
	const rootX, rootY = 1150, 720
	const termX, termY = 300, 200
	s.shell(t, "xdotool mousemove 5 5 && rm -f /tmp/wd-*")

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"WrongTokenGetsLogin", func(t *testing.T) {
			tb := b.newTab(t)
			before := s.seen.count()
			tb.run(20*time.Second, chromedp.Navigate(s.url+"/desktops/"+id+"#token=wd_not-the-token"))
			tb.waitJS("login screen", `document.querySelector('#login') && !document.querySelector('#login-error').hidden`, 10*time.Second)
			msg := eval[string](tb, `document.querySelector('#login-error').textContent`)
			if !strings.Contains(msg, "not accepted") {
				t.Errorf("login error %q", msg)
			}
			if h := eval[string](tb, `location.hash`); h != "" {
				t.Errorf("the token stayed in the address bar: %q", h)
			}
			if eval[bool](tb, `!!document.querySelector('#screen canvas') || document.querySelector('#screen').offsetParent !== null`) {
				t.Error("the desktop's screen shows behind a wrong token")
			}
			if n := eval[int](tb, `sessionStorage.length`); n != 0 {
				t.Errorf("a refused token is kept in session storage (%d items)", n)
			}
			if s.seen.count() == before {
				t.Error("the page never asked the server about the token")
			}
			// The same on the dashboard, typed into the form.
			tb.run(20*time.Second, chromedp.Navigate(s.url+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
				chromedp.SendKeys(chromedp.CSS(`#login-token`), "wd_wrong"),
				chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
			tb.waitJS("dashboard login error", `!document.querySelector('#login-error').hidden`, 10*time.Second)
			if n := eval[int](tb, `document.querySelectorAll('.card').length`); n != 0 {
				t.Errorf("%d desktops listed behind a wrong token", n)
			}
		}},
		{"DashboardListsDesktopWithThumbnail", func(t *testing.T) {
			tb := b.newTab(t)
			shots := func() int { return len(s.seen.containing("/v1/desktops/" + id + "/screenshot")) }
			shots0, since := shots(), time.Now()
			tb.run(20*time.Second, chromedp.Navigate(s.url+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
				chromedp.SendKeys(chromedp.CSS(`#login-token`), s.token),
				chromedp.SetValue(chromedp.CSS(`#login-name`), "tester"),
				chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
			card := fmt.Sprintf(`document.querySelector('.card[data-id=%q]')`, id)
			tb.waitJS("thumbnail", card+`?.querySelector('.thumb.has-picture img')?.naturalWidth === 320`, 30*time.Second)
			for sel, want := range map[string]string{".name": "browser-test", ".state": "running", ".snapshot": s.desktop.Snapshot, ".control": "agent"} {
				if got := eval[string](tb, card+`.querySelector('`+sel+`').textContent`); got != want {
					t.Errorf("card %s = %q, want %q", sel, got, want)
				}
			}
			// Live updates without a reload: control and state as they change.
			s.setControl(t, "person", "alice")
			tb.waitJS("control shown", card+`.querySelector('.control').textContent === 'person: alice'`, 10*time.Second)
			s.setControl(t, "agent", "")
			tb.waitJS("control back", card+`.querySelector('.control').textContent === 'agent'`, 10*time.Second)
			tb.run(10*time.Second, chromedp.Click(chromedp.CSS(`.card[data-id="`+id+`"] button[data-op="pause"]`)))
			tb.waitJS("paused", card+`.dataset.state === 'paused'`, 30*time.Second)
			if st := s.get(t).State; st != "paused" {
				t.Errorf("after Pause the API says %s", st)
			}
			tb.run(10*time.Second, chromedp.Click(chromedp.CSS(`.card[data-id="`+id+`"] button[data-op="resume"]`)))
			tb.waitJS("running again", card+`.dataset.state === 'running'`, 30*time.Second)
			// Thumbnails refresh a few times a second at most (every 400 ms,
			// less while the screen does not change).
			if n, secs := shots()-shots0, time.Since(since).Seconds(); float64(n) > 1+secs*2.5 {
				t.Errorf("%d thumbnails of one desktop in %.1fs: more than a few a second", n, secs)
			} else {
				t.Logf("%d thumbnails of one desktop in %.1fs", n, secs)
			}
			createForkDelete(t, s, tb)
			// A fleet host's pull of a snapshot, as it goes.
			s.pulls.Publish(api.Event{Type: api.EventPulling, Host: "h2", Pull: &api.SnapshotPull{Snapshot: "minimal", From: "h1", Bytes: 1 << 29, Total: 1 << 30}})
			tb.waitJS("pull progress", `document.querySelector('#pulls').textContent === 'pulling minimal on h2 from h1: 50%'`, 10*time.Second)
			s.pulls.Publish(api.Event{Type: api.EventPullFailed, Host: "h2", Pull: &api.SnapshotPull{Snapshot: "minimal", From: "h1"}, Summary: "h1 went away"})
			tb.waitJS("pull failure", `document.querySelector('#pulls').textContent === 'pulling minimal on h2 failed: h1 went away'`, 10*time.Second)
			if n := eval[int](tb, `document.querySelectorAll('.card').length`); n != 1 {
				t.Errorf("after pull events the dashboard shows %d cards, want the one desktop", n)
			}
			b.save(tb, "dashboard.png")
		}},
		{"ViewOnlyViewerShowsDesktopAndDropsInput", func(t *testing.T) {
			tok := s.issue(t, "view")
			tb := b.newTab(t)
			tb.run(20*time.Second, chromedp.Navigate(s.url+tok.ViewerURL))
			tb.waitJS("connected view-only", `document.querySelector('#screen').dataset.connected === 'true' && document.querySelector('#screen').dataset.mode === 'view'`, 30*time.Second)
			if h := eval[string](tb, `location.hash`); h != "" {
				t.Errorf("the token stayed in the address bar: %q", h)
			}
			if got := eval[string](tb, `sessionStorage.getItem('warmdesk.token.`+id+`')`); got != tok.Token {
				t.Errorf("session storage holds %q, want the link's token", got)
			}
			if eval[bool](tb, `!document.querySelector('#take').hidden`) {
				t.Error("a view token is offered Take control")
			}
			matchesScreenshot(t, s, tb)
			// As shipped: noVNC in view-only mode.
			viewOnlyInput(t, tb, rootX, rootY, "touch /tmp/wd-leaked\n")
			// A page changed to send input anyway (rfb.viewOnly = false): the
			// server's view-only proxy still drops it.
			eval[bool](tb, `(window.warmdesk.rfb.viewOnly = false, true)`)
			viewOnlyInput(t, tb, rootX, rootY-100, "touch /tmp/wd-leaked-forced\n")
			b.save(tb, "viewer-view-only.png")
		}},
		{"TakeControlClickAndTypeReachDesktop", func(t *testing.T) {
			tb := b.newTab(t)
			// The daemon's token, typed into the viewer's own login screen.
			tb.run(20*time.Second, chromedp.Navigate(s.url+"/desktops/"+id),
				chromedp.WaitVisible(chromedp.CSS(`#login-token`)),
				chromedp.SendKeys(chromedp.CSS(`#login-token`), s.token),
				chromedp.SetValue(chromedp.CSS(`#login-name`), "tester"),
				chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
			tb.waitJS("connected view-only", `document.querySelector('#screen').dataset.mode === 'view' && document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			tb.run(10*time.Second, chromedp.Click(chromedp.CSS(`#take`)))
			tb.waitJS("in control", `document.body.dataset.control === 'mine' && document.querySelector('#screen').dataset.mode === 'control' && document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			if d := s.get(t); d.Control.Holder != "person" || d.Control.By != "tester" {
				t.Fatalf("after Take control the API says %+v", d.Control)
			}
			agentActionRefused(t, s)
			// Keys first: the page focuses the screen once it may drive it.
			if !eval[bool](tb, `document.activeElement === document.querySelector('#screen canvas')`) {
				t.Fatal("the screen does not have the keyboard focus after Take control")
			}
			tb.run(10*time.Second, chromedp.KeyEvent("touch /tmp/wd-typed\n"))
			s.waitGuest(t, "typed command ran in xterm", 30*time.Second, func() bool { return s.exists(t, "/tmp/wd-typed") })
			// The view-only viewer's input was sent before all of this, so had
			// it reached the desktop, it would have by now.
			for _, f := range []string{"/tmp/wd-leaked", "/tmp/wd-leaked-forced"} {
				if s.exists(t, f) {
					t.Errorf("a view-only viewer's typing reached the desktop (%s exists)", f)
				}
			}
			if x, y := s.pointer(t); near(x, rootX) && (near(y, rootY) || near(y, rootY-100)) {
				t.Errorf("a view-only viewer's click reached the desktop: the pointer is at %d,%d", x, y)
			}
			x, y := tb.screenPoint(termX, termY)
			tb.run(10*time.Second, chromedp.MouseClickXY(x, y))
			s.waitGuest(t, "click moved the desktop's pointer", 20*time.Second, func() bool {
				px, py := s.pointer(t)
				return near(px, termX) && near(py, termY)
			})
			// ";" and the rest are unshifted keys: chromedp sends no Shift.
			tb.run(10*time.Second, chromedp.KeyEvent("echo typed in a browser; touch /tmp/wd-echoed\n"))
			s.waitGuest(t, "second command ran", 30*time.Second, func() bool { return s.exists(t, "/tmp/wd-echoed") })
			// The canvas follows the desktop live, in control mode too.
			matchesScreenshot(t, s, tb)
			b.save(tb, "viewer.png")
			screenshotButton(t, s, tb)
			pasteButton(t, s, tb)
			tb.run(10*time.Second, chromedp.Click(chromedp.CSS(`#handback`)))
			tb.waitJS("handed back", `document.body.dataset.control === 'agent' && document.querySelector('#screen').dataset.mode === 'view' && document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			if d := s.get(t); d.Control.Holder != "agent" {
				t.Errorf("after Hand back the API says %+v", d.Control)
			}
			// The same agent action as before goes through now: the 409 was
			// the person's control, not a bad request.
			if status, body := s.agentMove(t); status != 200 {
				t.Errorf("an agent action after Hand back: %d %s", status, body)
			}
			if !strings.Contains(eval[string](tb, `document.querySelector('#activity').textContent`), "control: person: tester") {
				t.Error("the activity strip does not show the handover")
			}
		}},
		{"ResetReconnectsTheViewerAndKeepsTokens", func(t *testing.T) {
			view := s.issue(t, "view")
			tb := b.newTab(t)
			tb.run(20*time.Second, chromedp.Navigate(s.url+view.ViewerURL))
			tb.waitJS("connected view-only", `document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			eval[bool](tb, `(window.beforeReset = window.warmdesk.rfb, true)`)
			s.shell(t, "touch /tmp/wd-before-reset")
			// An agent's control token may reset: a test harness's way to
			// start each case clean.
			ctl := s.issue(t, "control")
			d, err := client.New(s.url, ctl.Token).Reset(context.Background(), id, api.Reset{})
			if err != nil {
				t.Fatalf("reset with a control token: %v", err)
			}
			if d.ID != id || d.URLs != s.desktop.URLs || d.Resets != 1 || d.State != "running" {
				t.Fatalf("after reset: %+v", d)
			}
			tb.waitJS("viewer reconnected to the new machine", `window.warmdesk.rfb && window.warmdesk.rfb !== window.beforeReset && document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			if !strings.Contains(eval[string](tb, `document.querySelector('#activity').textContent`), "reset to "+d.Snapshot) {
				t.Error("the activity strip does not show the reset")
			}
			if s.exists(t, "/tmp/wd-before-reset") {
				t.Error("a file made before the reset is still there")
			}
			// The view token issued before the reset still reads the desktop.
			if _, err := client.New(s.url, view.Token).Desktop(context.Background(), id); err != nil {
				t.Errorf("the view token after the reset: %v", err)
			}
			matchesScreenshot(t, s, tb)
		}},
		{"RecordingShowsREC", func(t *testing.T) {
			tb := b.newTab(t)
			tb.run(20*time.Second, chromedp.Navigate(s.url+s.issue(t, "view").ViewerURL))
			tb.waitJS("connected", `document.querySelector('#screen').dataset.connected === 'true'`, 30*time.Second)
			if !eval[bool](tb, `document.querySelector('#rec').hidden`) {
				t.Fatal("REC shows before any recording")
			}
			var rec api.Recording
			if err := s.api.Do(context.Background(), "POST", "/v1/desktops/"+id+"/recordings", api.StartRecording{}, &rec); err != nil {
				t.Fatal(err)
			}
			tb.waitJS("REC shown", `!document.querySelector('#rec').hidden`, 10*time.Second)
			if err := s.api.Do(context.Background(), "POST", rec.URLs.Stop, nil, &rec); err != nil || rec.State != "done" {
				t.Fatalf("stop: %v %+v", err, rec)
			}
			tb.waitJS("REC gone", `document.querySelector('#rec').hidden`, 10*time.Second)
		}},
		{"NoTokenInAnyURL", func(t *testing.T) {
			for _, tok := range []string{s.token, "wd_not-the-token", "wdt1."} {
				if lines := s.seen.containing(url.QueryEscape(tok)); len(lines) > 0 {
					t.Errorf("a token reached the server in a URL or Referer: %q", lines)
				}
			}
		}},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.run) {
			return
		}
	}
	t.Logf("browser tests took %s (artifacts in %s)", time.Since(start).Round(time.Millisecond), b.artifacts)
}

// viewOnlyInput clicks on the screen and types, in a view-only viewer.
func viewOnlyInput(t *testing.T, tb *tab, x, y int, keys string) {
	t.Helper()
	px, py := tb.screenPoint(x, y)
	tb.run(10*time.Second, chromedp.MouseClickXY(px, py))
	// noVNC takes the focus on a click even when view-only; without it the
	// keys would not reach noVNC at all and this step would prove nothing.
	if !eval[bool](tb, `document.activeElement === document.querySelector('#screen canvas')`) {
		t.Fatal("the screen did not take the focus on a click")
	}
	tb.run(10*time.Second, chromedp.KeyEvent(keys))
}

// matchesScreenshot compares the viewer's canvas with the screenshot API's
// picture, waiting for noVNC to have drawn the screen.
func matchesScreenshot(t *testing.T, s *stack, tb *tab) {
	t.Helper()
	raw, _, err := s.api.Screenshot(context.Background(), s.desktop.ID, url.Values{"format": {"png"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	// The guest's background, away from the xterm: the picture is the
	// desktop, not a blank frame that would match a blank canvas.
	if r, g, b, _ := want.At(1200, 780).RGBA(); r>>8 != 0x25 || g>>8 != 0x30 || b>>8 != 0x3b {
		t.Fatalf("screenshot background %02x%02x%02x, want 25303b", r>>8, g>>8, b>>8)
	}
	// noVNC draws on animation frames and fires no event per frame.
	var got image.Image
	var diff float64
	matches := func() bool {
		got = tb.canvas()
		diff = differing(got, want)
		return diff < 0.005
	}
	if !testenv.Poll(20*time.Second, 50*time.Millisecond, time.Second, matches) {
		t.Fatalf("canvas %v differs from the screenshot %v in %.1f%% of pixels", got.Bounds().Size(), want.Bounds().Size(), 100*diff)
	}
	t.Logf("canvas %v matches the screenshot (%.3f%% of pixels differ)", got.Bounds().Size(), 100*diff)
}

// differing is the share of pixels that differ by more than a little in
// any channel (1 when the sizes differ).
func differing(a, b image.Image) float64 {
	if a.Bounds().Size() != b.Bounds().Size() {
		return 1
	}
	ab, bb := a.Bounds(), b.Bounds()
	n := 0
	for y := 0; y < ab.Dy(); y++ {
		for x := 0; x < ab.Dx(); x++ {
			r1, g1, b1, _ := a.At(ab.Min.X+x, ab.Min.Y+y).RGBA()
			r2, g2, b2, _ := b.At(bb.Min.X+x, bb.Min.Y+y).RGBA()
			if far(r1, r2) || far(g1, g2) || far(b1, b2) {
				n++
			}
		}
	}
	return float64(n) / float64(ab.Dx()*ab.Dy())
}

func far(a, b uint32) bool {
	d := int(a>>8) - int(b>>8)
	return d > 8 || d < -8
}

func near(a, b int) bool { return a-b <= 2 && b-a <= 2 }

// agentActionRefused checks that an agent's action gets 409 while a person
// holds control, with a body that says so.
func agentActionRefused(t *testing.T, s *stack) {
	t.Helper()
	status, body := s.agentMove(t)
	if status != 409 || !strings.Contains(body, "person_in_control") || !strings.Contains(body, "tester took control") {
		t.Errorf("an agent action while a person is in control: %d %s, want 409 person_in_control naming the person", status, body)
	}
}

// createForkDelete drives the dashboard's Create, Fork and Delete buttons.
func createForkDelete(t *testing.T, s *stack, tb *tab) {
	t.Helper()
	before := len(s.list(t))
	tb.run(10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#create-name`), "from-dashboard"),
		chromedp.Click(chromedp.CSS(`#create button[type=submit]`)))
	tb.waitJS("created card", `[...document.querySelectorAll('.card .name')].some((n) => n.textContent === 'from-dashboard' && n.closest('.card').dataset.state === 'running')`, 60*time.Second)
	created := s.byName(t, "from-dashboard")
	card := `.card[data-id="` + created.ID + `"]`
	tb.run(10*time.Second, chromedp.Click(chromedp.CSS(card+` button[data-op="fork"]`)))
	tb.waitJS("fork card", `[...document.querySelectorAll('.card')].some((c) => c.querySelector('dd.forkof').textContent === 'from-dashboard' && c.dataset.state === 'running')`, 2*time.Minute)
	var fork string
	for _, d := range s.list(t) {
		if d.ForkOf == created.ID {
			fork = d.ID
		}
	}
	if fork == "" {
		t.Fatal("the API lists no fork of the desktop made on the dashboard")
	}
	// Delete asks twice, on the button itself.
	for _, id := range []string{fork, created.ID} {
		del := `.card[data-id="` + id + `"] button[data-op="delete"]`
		tb.run(10*time.Second, chromedp.Click(chromedp.CSS(del)))
		tb.waitJS("delete armed", `document.querySelector('`+del+`').textContent === 'Really delete?'`, 5*time.Second)
		tb.run(10*time.Second, chromedp.Click(chromedp.CSS(del)))
		tb.waitJS("card gone", `!document.querySelector('.card[data-id="`+id+`"]')`, 60*time.Second)
	}
	if n := len(s.list(t)); n != before {
		t.Errorf("%d desktops after create, fork and two deletes, want %d", n, before)
	}
}

// screenshotButton clicks the viewer's Screenshot button and checks the
// PNG the browser downloads.
func screenshotButton(t *testing.T, s *stack, tb *tab) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	yes := true
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &yes,
	}); err != nil {
		t.Fatal(err)
	}
	begun := chromedp.BrowserEvents(ctx, cdpbrowser.DownloadWillBegin)
	progress := chromedp.BrowserEvents(ctx, cdpbrowser.DownloadProgress)
	tb.run(10*time.Second, chromedp.Click(chromedp.CSS(`#shot`)))
	var name string
	for ev, err := range begun {
		if err != nil {
			t.Fatal(err)
		}
		name = ev.SuggestedFilename
		break
	}
	if !strings.HasPrefix(name, "warmdesk-"+s.desktop.ID+"-") || !strings.HasSuffix(name, ".png") {
		t.Errorf("download named %q", name)
	}
	for ev, err := range progress {
		if err != nil {
			t.Fatal(err)
		}
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			break
		}
		if ev.State == cdpbrowser.DownloadProgressStateCanceled {
			t.Fatal("the screenshot download was canceled")
		}
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("downloaded screenshot: %v", err)
	}
	if cfg.Width != 1280 || cfg.Height != 800 {
		t.Errorf("downloaded screenshot is %dx%d, want 1280x800", cfg.Width, cfg.Height)
	}
}

// pasteButton sends text through the viewer's Paste form and reads the
// desktop's clipboard back in the guest.
func pasteButton(t *testing.T, s *stack, tb *tab) {
	t.Helper()
	const text = "pasted from a browser: naïve café 日本語"
	tb.run(10*time.Second,
		chromedp.Click(chromedp.CSS(`#paste-open`)),
		chromedp.WaitVisible(chromedp.CSS(`#paste-text`)),
		chromedp.SetValue(chromedp.CSS(`#paste-text`), text),
		chromedp.Click(chromedp.CSS(`#paste button[type=submit]`)))
	tb.waitJS("paste sent", `document.querySelector('#paste').hidden || document.querySelector('#paste-status').textContent.startsWith('failed')`, 30*time.Second)
	if st := eval[string](tb, `document.querySelector('#paste-status').textContent`); st != "" {
		t.Fatalf("paste: %s", st)
	}
	if got := s.shell(t, "xclip -o -selection clipboard"); got != text {
		t.Errorf("the desktop's clipboard holds %q, want %q", got, text)
	}
	if !eval[bool](tb, `document.activeElement === document.querySelector('#screen canvas')`) {
		t.Error("the screen did not get the keyboard back after pasting")
	}
}

// requireNoVNC skips (fails in CI) when scripts/setup has not installed
// noVNC where hostd looks for it.
func requireNoVNC(t *testing.T) {
	t.Helper()
	hs := httptest.NewServer(web.New(web.Config{Token: "t"}).Handler())
	defer hs.Close()
	res, err := http.Get(hs.URL + "/static/vendor/novnc/core/rfb.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		if testenv.InCI() {
			t.Fatal(web.NoVNCMissing)
		}
		t.Skip(web.NoVNCMissing)
	}
}
