package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/input"
)

// DefaultTrials is how many times the trials suite runs each trial: the
// bar the hit rates were first held to.
const DefaultTrials = 50

// The trials: what agents do most, repeated, each checked inside the
// guest, so a rate below 1 is input that did not land where it was aimed.
// Under TCG the guest reads the tablet's reports late: a click's keys once
// overtook it (docs/API.md, "Keys after a click").
var (
	// trialPaths are the click, type, click trials on Chromium's start
	// page, each on a fresh desktop from a warm pool: the guest has had no
	// time since its restore when the first click arrives.
	trialPaths = []string{"per_action", "batch", "anthropic_turn", "gemini", "mcp"}
	// TrialKeys are the suite's hit-rate keys (a fraction of the trials).
	TrialKeys = append(trialKeysOf(trialPaths), "trial_xterm_rate", "trial_menu_shown_rate", "trial_menu_closed_rate")
)

func trialKeysOf(paths []string) []string {
	var keys []string
	for _, p := range paths {
		keys = append(keys, "trial_"+p+"_rate")
	}
	return keys
}

// trialsSuite runs each trial o.Trials times: click, type, click on the
// browser snapshot's start page through each door (the canonical batch
// one action per call and in one batch, a whole Anthropic turn, Gemini's
// function calls on its grid, MCP's computer tool), and on the minimal
// desktop a click into the xterm that is not focused then a typed command,
// and a right-click menu shown then closed by Escape. A miss is noted with
// what was seen instead.
func (e *env) trialsSuite(ctx context.Context) error {
	n := e.opts.Trials
	if n <= 0 {
		n = DefaultTrials
	}
	e.res.set("trials_n", float64(n))
	srv, c := e.serve(ctx)
	defer srv.Close()
	t := &trials{e: e, c: c, n: n}
	if err := t.xterm(ctx); err != nil {
		return err
	}
	if err := t.menu(ctx); err != nil {
		return err
	}
	return t.browser(ctx, srv.URL, benchToken)
}

type trials struct {
	e *env
	c *client.Client
	n int
}

// rate records landed of t.n under key, and notes the misses.
func (t *trials) rate(key string, landed int, misses []string) {
	t.e.res.set(key, float64(landed)/float64(t.n))
	t.e.progress("  %s: %d of %d", key, landed, t.n)
	if len(misses) > 0 {
		t.e.res.note(fmt.Sprintf("%s: %d of %d missed: %s", key, len(misses), t.n, strings.Join(misses, "; ")))
	}
}

// desktop creates a desktop of snapshot through the API.
func (t *trials) desktop(ctx context.Context, snapshot string) (string, error) {
	d, err := t.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snapshot})
	return d.ID, err
}

func (t *trials) anthropic(ctx context.Context, id, body string) (input.AnthropicToolResult, error) {
	res, err := t.c.Anthropic(ctx, id, json.RawMessage(body), client.ComputerOptions{})
	if err == nil && res.IsError {
		err = fmt.Errorf("computer call %s: %+v", body, res.Content)
	}
	return res, err
}

// xterm: a second xterm beside the minimal desktop's first, then a click
// into the one that is not focused and a command typed into it, which
// must write its file.
func (t *trials) xterm(ctx context.Context) error {
	id, err := t.desktop(ctx, t.e.snap.Name)
	if err != nil {
		return err
	}
	defer t.c.DeleteDesktop(context.WithoutCancel(ctx), id)
	res, err := t.c.Exec(ctx, id, api.ExecRequest{Shell: "DISPLAY=:0 setsid xterm -fa 'DejaVu Sans Mono' -fs 11 -geometry 60x20+700+420 -title second -e bash </dev/null >/dev/null 2>&1 & " +
		"DISPLAY=:0 xdotool search --sync --onlyvisible --name '^second$' >/dev/null", Timeout: api.Duration(time.Minute)})
	if err != nil || res.ExitCode != 0 {
		return fmt.Errorf("second xterm: %v %+v", err, res)
	}
	terms := []image.Point{{X: 300, Y: 300}, {X: 900, Y: 560}}
	landed, misses := 0, []string(nil)
	for i := range t.n {
		at := terms[i%2]
		if _, err := t.anthropic(ctx, id, fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, at.X, at.Y)); err != nil {
			return err
		}
		if _, err := t.anthropic(ctx, id, fmt.Sprintf(`{"action": "type", "text": "echo %d > /tmp/trial-%d\n"}`, i, i)); err != nil {
			return err
		}
		path, want := fmt.Sprintf("/tmp/trial-%d", i), fmt.Sprintf("%d\n", i)
		if t.guestFile(ctx, id, path, want, 20*time.Second) {
			landed++
		} else {
			misses = append(misses, fmt.Sprintf("trial %d: %s never held %q", i, path, want))
		}
	}
	t.rate("trial_xterm_rate", landed, misses)
	return nil
}

// guestFile waits until path in the guest holds want: what xterm's shell
// does with typed input happens on the guest's time, which gives no
// signal to wait on.
func (t *trials) guestFile(ctx context.Context, id, path, want string, within time.Duration) bool {
	return poll(ctx, within, func() bool {
		var b strings.Builder
		_, err := t.c.ReadFile(ctx, id, path, &b)
		return err == nil && b.String() == want
	})
}

// poll calls done until it is true or within passes, waiting a little
// longer each time (up to a second).
func poll(ctx context.Context, within time.Duration, done func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	wait := 50 * time.Millisecond
	for !done() {
		select {
		case <-ctx.Done():
			return done()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
	return true
}

// minimalBackground is the minimal desktop's root window colour.
var minimalBackground = color.RGBA{0x25, 0x30, 0x3b, 0xff}

// menu: a right-click on the minimal desktop's root window, whose settled
// screenshot must show openbox's menu, then Escape, whose must not.
func (t *trials) menu(ctx context.Context) error {
	id, err := t.desktop(ctx, t.e.snap.Name)
	if err != nil {
		return err
	}
	defer t.c.DeleteDesktop(context.WithoutCancel(ctx), id)
	at := image.Pt(1000, 700) // below the xterm
	area := image.Rect(at.X, at.Y-300, min(at.X+300, 1280), 800)
	shown, closed := 0, 0
	var misses []string
	for i := range t.n {
		res, err := t.anthropic(ctx, id, fmt.Sprintf(`{"action": "right_click", "coordinate": [%d, %d]}`, at.X, at.Y))
		if err != nil {
			return err
		}
		if img, err := resultImage(res); err != nil {
			return err
		} else if share(img, area, minimalBackground) < 0.9 {
			shown++
		} else {
			misses = append(misses, fmt.Sprintf("trial %d: no menu in the right-click's screenshot", i))
		}
		res, err = t.anthropic(ctx, id, `{"action": "key", "text": "Escape"}`)
		if err != nil {
			return err
		}
		if img, err := resultImage(res); err != nil {
			return err
		} else if share(img, area, minimalBackground) > 0.97 {
			closed++
		} else {
			misses = append(misses, fmt.Sprintf("trial %d: the menu still in Escape's screenshot", i))
		}
	}
	t.rate("trial_menu_shown_rate", shown, nil)
	t.rate("trial_menu_closed_rate", closed, misses)
	return nil
}

// resultImage decodes a tool result's screenshot.
func resultImage(res input.AnthropicToolResult) (*image.RGBA, error) {
	for _, b := range res.Content {
		if b.Type == "image" && b.Source != nil {
			raw, err := base64.StdEncoding.DecodeString(b.Source.Data)
			if err != nil {
				return nil, err
			}
			return decodeRGBA(raw)
		}
	}
	return nil, fmt.Errorf("tool result without a screenshot: %+v", res.Content)
}

// decodeRGBA decodes a PNG into RGBA pixels.
func decodeRGBA(data []byte) (*image.RGBA, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba, nil
}

// share is the fraction of r's pixels near c.
func share(img *image.RGBA, r image.Rectangle, c color.RGBA) float64 {
	r = r.Intersect(img.Bounds())
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if near(img.RGBAAt(x, y), c) {
				n++
			}
		}
	}
	return float64(n) / float64(max(1, r.Dx()*r.Dy()))
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) int { return max(int(x), int(y)) - min(int(x), int(y)) }
	return d(a.R, b.R) < 8 && d(a.G, b.G) < 8 && d(a.B, b.B) < 8
}

// startPageColor is the browser image's start page background.
var startPageColor = color.RGBA{0xf4, 0xf1, 0xea, 0xff}

// browser runs the click, type, click trials through every door.
func (t *trials) browser(ctx context.Context, base, token string) error {
	snap, ok, err := t.e.browserSnapshot("trial_per_action_rate")
	if !ok {
		for _, k := range trialKeysOf(trialPaths[1:]) {
			t.e.res.null(k, "no browser snapshot (see trial_per_action_rate)")
		}
	}
	if !ok || err != nil {
		return err
	}
	t.e.drv.Warm(snap, 1)
	defer t.e.drv.Warm(snap, 0)
	session, err := mcpSession(ctx, base, token)
	if err != nil {
		return err
	}
	defer session.Close()
	var field, goButton image.Point
	var w, h int
	for _, path := range trialPaths {
		landed, misses := 0, []string(nil)
		var took Dist
		for i := range t.n {
			if err := t.e.drv.WaitPool(ctx, snap.Name, 1); err != nil {
				return err
			}
			id, err := t.desktop(ctx, snap.Name)
			if err != nil {
				return err
			}
			if field == (image.Point{}) {
				if field, goButton, w, h, err = t.e.startPageForm(ctx, id); err != nil {
					t.c.DeleteDesktop(context.WithoutCancel(ctx), id)
					return err
				}
			}
			word := fmt.Sprintf("%s%03d", path[:1], i)
			start := time.Now()
			err = t.clickTypeClick(ctx, session, path, id, field, goButton, w, h, word)
			took.Add(time.Since(start))
			if err == nil {
				title := t.chromiumTitle(ctx, id)
				if title == "clicked: "+word {
					landed++
				} else {
					misses = append(misses, fmt.Sprintf("trial %d: the page said %q", i, title))
				}
			}
			if derr := t.c.DeleteDesktop(context.WithoutCancel(ctx), id); err == nil {
				err = derr
			}
			if err != nil {
				return fmt.Errorf("%s trial %d: %w", path, i, err)
			}
		}
		t.rate("trial_"+path+"_rate", landed, misses)
		t.e.res.dist("trial_"+path+"_call", &took)
	}
	return nil
}

// startPageForm finds the start page's field and its Go button, which follows
// the field on its row after a space of page colour.
func (e *env) startPageForm(ctx context.Context, id string) (field, goButton image.Point, w, h int, err error) {
	if field, err = e.startPageField(ctx, id); err != nil {
		return
	}
	scr, _ := e.screens.Get(id)
	img, _ := scr.Mirror.Frame(nil)
	b := img.Bounds()
	x := field.X
	for x < b.Max.X && !near(img.RGBAAt(x, field.Y), startPageColor) {
		x++
	}
	for x < b.Max.X && near(img.RGBAAt(x, field.Y), startPageColor) {
		x++
	}
	if x >= b.Max.X-20 {
		return field, goButton, 0, 0, fmt.Errorf("desktop %s: no Go button beside the start page's field", id)
	}
	return field, image.Pt(x+20, field.Y), b.Dx(), b.Dy(), nil
}

// clickTypeClick clicks the field, types word and clicks Go, through one
// door.
func (t *trials) clickTypeClick(ctx context.Context, session *mcp.ClientSession, path, id string, field, goButton image.Point, w, h int, word string) error {
	switch path {
	case "per_action":
		// As an agent loop sends them: one call each, each answered with
		// its settled screenshot.
		for _, body := range []string{
			fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, field.X, field.Y),
			fmt.Sprintf(`{"action": "type", "text": %q}`, word),
			fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, goButton.X, goButton.Y),
		} {
			if _, err := t.anthropic(ctx, id, body); err != nil {
				return err
			}
		}
		return nil
	case "batch":
		_, err := t.c.Actions(ctx, id, api.ActionsRequest{Actions: input.Batch{
			{Kind: input.KindClick, At: &input.Point{X: field.X, Y: field.Y}},
			{Kind: input.KindType, Text: word},
			{Kind: input.KindClick, At: &input.Point{X: goButton.X, Y: goButton.Y}},
		}, Screenshot: true})
		return err
	case "anthropic_turn":
		turn := fmt.Sprintf(`[
		  {"type": "tool_use", "id": "t1", "name": "left_click", "input": {"coordinate": [%d, %d]}},
		  {"type": "tool_use", "id": "t2", "name": "type", "input": {"text": %q}},
		  {"type": "tool_use", "id": "t3", "name": "left_click", "input": {"coordinate": [%d, %d]}}]`, field.X, field.Y, word, goButton.X, goButton.Y)
		var out api.AnthropicTurnResult
		if err := t.c.Do(ctx, http.MethodPost, "/v1/desktops/"+id+"/computer/anthropic", json.RawMessage(turn), &out); err != nil {
			return err
		}
		for _, r := range out.Content {
			if r.IsError {
				return fmt.Errorf("turn: %+v", out.Content)
			}
		}
		return nil
	case "gemini":
		grid := func(p image.Point) (int, int) { return (p.X*1000 + w - 1) / w, (p.Y*1000 + h - 1) / h }
		fx, fy := grid(field)
		gx, gy := grid(goButton)
		calls := fmt.Sprintf(`[
		  {"name": "type_text_at", "args": {"x": %d, "y": %d, "text": %q, "press_enter": false, "clear_before_typing": false}},
		  {"name": "click_at", "args": {"x": %d, "y": %d}}]`, fx, fy, word, gx, gy)
		var out api.GeminiTurnResult
		if err := t.c.Do(ctx, http.MethodPost, "/v1/desktops/"+id+"/computer/gemini", json.RawMessage(calls), &out); err != nil {
			return err
		}
		for _, p := range out.Parts {
			if p.FunctionResponse.Response["error"] != nil {
				return fmt.Errorf("gemini: %+v", p.FunctionResponse.Response)
			}
		}
		return nil
	case "mcp":
		for _, args := range []map[string]any{
			{"desktop_id": id, "action": "left_click", "coordinate": []int{field.X, field.Y}},
			{"desktop_id": id, "action": "type", "text": word},
			{"desktop_id": id, "action": "left_click", "coordinate": []int{goButton.X, goButton.Y}},
		} {
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "computer", Arguments: args})
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("mcp computer %v: %+v", args, res.Content)
			}
		}
		return nil
	}
	return fmt.Errorf("no trial path %q", path)
}

// chromiumTitle waits for the page to retitle its window after Go and
// returns the title, or "(never retitled)" after 90 s.
func (t *trials) chromiumTitle(ctx context.Context, id string) string {
	var title string
	found := func() bool {
		title, _ = t.e.pageTitle(ctx, t.c, id)
		return title != ""
	}
	if !poll(ctx, 90*time.Second, found) {
		return "(never retitled)"
	}
	return title
}

// mcpSession opens an MCP session on the server's /mcp with its token,
// through the official Go SDK's client.
func mcpSession(ctx context.Context, base, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-bench", Version: "0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer(token)},
	}, nil)
}

// bearer sets the token on every request.
type bearer string

func (tok bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}
