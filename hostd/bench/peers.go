package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
)

// peersRounds is the number of rounds of each call in the peers suite.
const peersRounds = 10

// demoScreenshotDelay is the fixed wait Anthropic's computer-use demo
// takes after every action before its screenshot.
const demoScreenshotDelay = 2 * time.Second

// peersKeys are the suite's distributions.
var peersKeys = []string{"click_xdotool", "click_api", "shot_scrot", "shot_api_changed", "shot_api_cached", "step_demo", "step_api"}

// peersRatioOf names each ratio's distributions: the peers' way over
// warmdesk's.
var peersRatioOf = map[string][2]string{
	"peers_click_ratio":        {"click_xdotool", "click_api"},
	"peers_shot_changed_ratio": {"shot_scrot", "shot_api_changed"},
	"peers_shot_cached_ratio":  {"shot_scrot", "shot_api_cached"},
	"peers_step_ratio":         {"step_demo", "step_api"},
}

// peersRatios are the ratio keys, in order.
var peersRatios = []string{"peers_click_ratio", "peers_shot_changed_ratio", "peers_shot_cached_ratio", "peers_step_ratio"}

// peersSuite measures the peers' approach beside warmdesk's own on one
// desktop of the e2b-desktop recipe's snapshot (it has xdotool and scrot),
// every call through the same in-process HTTP server:
//
//   - a click E2B-style: `xdotool mousemove X Y click 1` in a login shell
//     through the exec endpoint (one shell round trip per action), beside a
//     click on the action endpoint;
//   - a screenshot E2B-style: `scrot` to a file, the file read, the file
//     removed (three round trips), beside the screenshot endpoint on a
//     changed screen and on an unchanged one;
//   - an agent step demo-style: the xdotool click, the demo's fixed 2 s,
//     the scrot screenshot (the 2 s is added to the two measured calls of
//     the same round, not slept), beside one action batch with a settled
//     screenshot (the settle's real wait).
func (e *env) peersSuite(ctx context.Context) error {
	snap, err := e.cat.Get(e.opts.E2BSnapshot)
	if err != nil {
		why := fmt.Sprintf("no %q snapshot, which has xdotool and scrot (hostd image build -f examples/recipes/e2b-desktop.yaml; hostd snapshot bake --image e2b-desktop)", e.opts.E2BSnapshot)
		for _, k := range peersKeys {
			e.res.null("peers_"+k+"_p50_ms", why)
		}
		for _, k := range peersRatios {
			e.res.null(k, why)
		}
		return nil
	}
	if err := e.cat.Verify(snap); err != nil {
		return err
	}
	d, m, _, err := e.liveDesktopOf(ctx, snap.Name)
	if d.ID != "" {
		defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	}
	if err != nil {
		return err
	}
	scr, _ := e.screens.Get(d.ID)

	const token = benchToken
	srv, _ := e.serve(ctx)
	defer srv.Close()
	c := peerClient{base: srv.URL + "/v1/desktops/" + d.ID, token: token}

	dists := map[string]*Dist{}
	for _, k := range peersKeys {
		dists[k] = &Dist{}
	}
	for i := range peersRounds {
		x, y := 400+(i%2)*200, 400+(i%3)*60

		took, err := timed(func() error {
			return c.shell(ctx, fmt.Sprintf("xdotool mousemove %d %d click 1", x, y))
		})
		if err != nil {
			return fmt.Errorf("E2B-style click: %w", err)
		}
		dists["click_xdotool"].Add(took)
		clickTook := took

		if took, err = timed(func() error { return c.scrot(ctx, fmt.Sprintf("/tmp/screenshot-bench-%d.png", i)) }); err != nil {
			return fmt.Errorf("E2B-style screenshot: %w", err)
		}
		dists["shot_scrot"].Add(took)
		dists["step_demo"].Add(clickTook + demoScreenshotDelay + took)

		body := fmt.Sprintf(`{"actions":[{"action":"click","x":%d,"y":%d}]}`, x+100, y)
		if _, took, err = postBatch(ctx, c.base+"/actions", token, body); err != nil {
			return fmt.Errorf("warmdesk's click: %w", err)
		}
		dists["click_api"].Add(took)

		// A pointer move the mirror has seen, so the next screenshot
		// encodes; then the same screen again, from the cache.
		if err := wiggle(ctx, m, scr.Mirror, i); err != nil {
			return fmt.Errorf("change the screen: %w", err)
		}
		for _, k := range []string{"shot_api_changed", "shot_api_cached"} {
			if took, err = timed(func() error { return c.screenshot(ctx) }); err != nil {
				return fmt.Errorf("warmdesk's screenshot: %w", err)
			}
			dists[k].Add(took)
		}

		body = fmt.Sprintf(`{"actions":[{"action":"click","x":%d,"y":%d}],"screenshot":true,"timeout_ms":10000}`, x, y+30)
		out, took, err := postBatch(ctx, c.base+"/actions", token, body)
		if err != nil {
			return fmt.Errorf("warmdesk's step: %w", err)
		}
		if out.Screenshot == nil {
			return fmt.Errorf("a batch with screenshot:true came back without a screenshot")
		}
		dists["step_api"].Add(took)
	}
	for _, k := range peersKeys {
		e.res.dist("peers_"+k, dists[k])
	}
	for key, pair := range peersRatioOf {
		if p := dists[pair[1]].Percentile(50); p > 0 {
			e.res.set(key, float64(dists[pair[0]].Percentile(50))/float64(p))
		}
	}
	p50 := func(k string) time.Duration { return dists[k].Percentile(50).Round(100 * time.Microsecond) }
	e.progress("  peers: click xdotool p50 %s beside the action endpoint's %s; screenshot scrot p50 %s beside %s changed, %s cached; agent step demo-style p50 %s beside %s",
		p50("click_xdotool"), p50("click_api"), p50("shot_scrot"), p50("shot_api_changed"), p50("shot_api_cached"), p50("step_demo"), p50("step_api"))
	return nil
}

func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

// peerClient calls one desktop's endpoints as a peer's SDK would call its
// own: one HTTP request per shell command or file.
type peerClient struct {
	base  string
	token string
}

func (c peerClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, out)
	}
	return out, nil
}

// shell runs a command line in a login shell on the desktop's display, as
// E2B's envd runs a command, and fails unless it exits 0.
func (c peerClient) shell(ctx context.Context, line string) error {
	raw, err := c.do(ctx, http.MethodPost, "/exec", api.ExecRequest{
		Cmd: "/bin/bash", Args: []string{"-l", "-c", line}, Env: map[string]string{"DISPLAY": ":0"},
	})
	if err != nil {
		return err
	}
	var res api.ExecResponse
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("%q: exit %d: %s", line, res.ExitCode, res.Stderr)
	}
	return nil
}

// scrot takes a screenshot as @e2b/desktop does: scrot into a file, read
// it, remove it.
func (c peerClient) scrot(ctx context.Context, path string) error {
	if err := c.shell(ctx, "scrot --pointer "+path); err != nil {
		return err
	}
	png, err := c.do(ctx, http.MethodGet, "/files?path="+url.QueryEscape(path), nil)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(png), "\x89PNG") {
		return fmt.Errorf("%s is no PNG (%d bytes)", path, len(png))
	}
	return c.shell(ctx, "rm "+path)
}

func (c peerClient) screenshot(ctx context.Context) error {
	png, err := c.do(ctx, http.MethodGet, "/screenshot", nil)
	if err == nil && !strings.HasPrefix(string(png), "\x89PNG") {
		err = fmt.Errorf("the screenshot is no PNG (%d bytes)", len(png))
	}
	return err
}
