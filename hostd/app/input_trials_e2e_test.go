package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// Input lands where it was aimed: repeated trials of what agents do most,
// each checked inside the guest. Under TCG the guest reads the USB
// tablet's reports late, so without the drive service's sync a click's
// keys overtook it (docs/API.md, "Keys after a click").

// trials is how many times each trial runs: 50 (the bar the issue set),
// or WARMDESK_TRIALS.
func trials(t *testing.T) int {
	if v := os.Getenv("WARMDESK_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WARMDESK_TRIALS=%q: want a positive number", v)
		}
		return n
	}
	return 50
}

// startForm finds the start page's text field and its Go button.
func startForm(t *testing.T, img *image.RGBA) (field, goButton image.Point) {
	t.Helper()
	field, ok := findField(img, 100, 100)
	if !ok {
		t.Fatal("no text field on the start page")
	}
	// The button follows the field on its row, after the field's border
	// and a space of page colour.
	x := field.X
	for x < img.Bounds().Max.X && !near(img.RGBAAt(x, field.Y), pageColor) {
		x++
	}
	for x < img.Bounds().Max.X && near(img.RGBAAt(x, field.Y), pageColor) {
		x++
	}
	if x >= img.Bounds().Max.X-20 {
		t.Fatal("no Go button beside the text field")
	}
	return field, image.Pt(x+20, field.Y)
}

// anthropic sends one computer tool call and fails the test if it fails.
func (s *actionStack) anthropic(t *testing.T, id string, body string) input.AnthropicToolResult {
	t.Helper()
	res, err := s.c.Anthropic(s.ctx(t), id, json.RawMessage(body), client.ComputerOptions{})
	if err != nil || res.IsError {
		t.Fatalf("computer call %s: %v %+v", body, err, res)
	}
	return res
}

// chromiumTitle waits for the page to retitle its window after Go, and
// returns the title (Chromium's " - Chromium" suffix taken off), or "(never
// retitled)" after 90 s.
func (s *actionStack) chromiumTitle(t *testing.T, id string) string {
	t.Helper()
	var title string
	found := func() bool {
		res, err := s.c.Exec(s.ctx(t), id, api.ExecRequest{Shell: "DISPLAY=:0 xdotool search --name '^clicked: ' getwindowname %@", Timeout: api.Duration(20 * time.Second)})
		if err != nil || res.ExitCode != 0 {
			return false
		}
		title = strings.TrimSuffix(strings.TrimSpace(res.Stdout), " - Chromium")
		return title != ""
	}
	if !testenv.Poll(90*time.Second, 100*time.Millisecond, 2*time.Second, found) {
		diag, _ := s.c.Exec(s.ctx(t), id, api.ExecRequest{Shell: "export DISPLAY=:0; xdotool getwindowfocus getwindowname; xdotool getactivewindow getwindowname; xdotool getmouselocation; dmesg | tail -8; grep -E 'xhci|i8042' /proc/interrupts; cat /proc/uptime", Timeout: api.Duration(20 * time.Second)})
		// A miss, counted with the others, so the failure reports the rate.
		t.Logf("desktop %s: the page never retitled its window after Go\n%s%s", id, diag.Stdout, diag.Stderr)
		return "(never retitled)"
	}
	return title
}

func TestClickThenTypeLandsInChromium(t *testing.T) {
	// From a warm pool, as hostd serve creates them: the guest has had no
	// time at all since its restore when the first click arrives.
	s := startStackWith(t, images.FlavorBrowser, 1)
	field, goButton := startForm(t, s.screen(t))
	t.Logf("field at %v, Go at %v", field, goButton)
	n := trials(t)
	var perAction, oneBatch []time.Duration
	modes := []string{"per-action", "one-batch"}
	if m := os.Getenv("WARMDESK_TRIAL_MODE"); m != "" {
		modes = []string{m}
	}
	for _, mode := range modes {
		landed, others := 0, []string{}
		for i := range n {
			// Each trial on a fresh desktop, restored from the snapshot into
			// a QEMU of the pool.
			if err := s.drv.WaitPool(s.ctx(t), s.snap, 1); err != nil {
				t.Fatal(err)
			}
			d, err := s.c.CreateDesktop(s.ctx(t), api.CreateDesktop{Snapshot: s.snap})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.c.DeleteDesktop(context.Background(), d.ID) })
			word := fmt.Sprintf("w%05d", i)
			start := time.Now()
			switch mode {
			case "per-action":
				// As an agent loop sends them: one call each, each answered
				// with its settled screenshot.
				s.anthropic(t, d.ID, fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, field.X, field.Y))
				s.anthropic(t, d.ID, fmt.Sprintf(`{"action": "type", "text": %q}`, word))
				s.anthropic(t, d.ID, fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, goButton.X, goButton.Y))
				perAction = append(perAction, time.Since(start))
			case "one-batch":
				resp := s.actionsOn(t, d.ID, api.ActionsRequest{Actions: input.Batch{
					{Kind: input.KindClick, At: &input.Point{X: field.X, Y: field.Y}},
					{Kind: input.KindType, Text: word},
					{Kind: input.KindClick, At: &input.Point{X: goButton.X, Y: goButton.Y}},
				}, Screenshot: true})
				oneBatch = append(oneBatch, time.Since(start))
				t.Logf("trial %d: sync %.1f ms, warnings %q", i, resp.SyncMs, resp.Warnings)
				if os.Getenv("WARMDESK_TRIAL_SHOTS") != "" {
					where := s.shellOn(t, d.ID, "DISPLAY=:0 xdotool getmouselocation")
					t.Logf("trial %d: X pointer right after the batch: %s", i, where.Stdout)
				}
				if dir := os.Getenv("WARMDESK_TRIAL_SHOTS"); dir != "" {
					os.WriteFile(filepath.Join(dir, fmt.Sprintf("batch-%d.png", i)), resp.Screenshot.Data, 0o644)
				}
			}
			if title := s.chromiumTitle(t, d.ID); title == "clicked: "+word {
				landed++
			} else {
				others = append(others, fmt.Sprintf("%q", title))
			}
			if err := s.c.DeleteDesktop(s.ctx(t), d.ID); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: the text landed in %d of %d trials", mode, landed, n)
		if landed != n {
			t.Errorf("%s: the text landed in %d of %d trials; the others' titles: %s", mode, landed, n, strings.Join(others, ", "))
		}
	}
	t.Logf("click, type, click: per action p50 %s, in one batch p50 %s", p50(perAction), p50(oneBatch))
}

// The same trial through the other front doors: a whole Anthropic toolset
// turn, Gemini's function calls on its 0-999 grid, and MCP's computer tool
// through the official Go SDK's client. Ten trials each unless
// WARMDESK_TRIALS says otherwise: the 50 above already hold the drive
// service to the bar, and these doors all end in it.
func TestClickThenTypeThroughEveryFrontDoor(t *testing.T) {
	s := startStackWith(t, images.FlavorBrowser, 1)
	img := s.screen(t)
	field, goButton := startForm(t, img)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	grid := func(p image.Point) (int, int) { return (p.X*1000 + w - 1) / w, (p.Y*1000 + h - 1) / h }
	n := 10
	if os.Getenv("WARMDESK_TRIALS") != "" {
		n = trials(t)
	}
	session, err := mcpSessionFor(t, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, door := range []string{"anthropic-turn", "gemini", "mcp"} {
		landed, others := 0, []string{}
		for i := range n {
			if err := s.drv.WaitPool(s.ctx(t), s.snap, 1); err != nil {
				t.Fatal(err)
			}
			d, err := s.c.CreateDesktop(s.ctx(t), api.CreateDesktop{Snapshot: s.snap})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.c.DeleteDesktop(context.Background(), d.ID) })
			word := fmt.Sprintf("%s%03d", door[:1], i)
			switch door {
			case "anthropic-turn":
				turn := fmt.Sprintf(`[
				  {"type": "tool_use", "id": "t1", "name": "left_click", "input": {"coordinate": [%d, %d]}},
				  {"type": "tool_use", "id": "t2", "name": "type", "input": {"text": %q}},
				  {"type": "tool_use", "id": "t3", "name": "left_click", "input": {"coordinate": [%d, %d]}}]`, field.X, field.Y, word, goButton.X, goButton.Y)
				var out api.AnthropicTurnResult
				if err := s.c.Do(s.ctx(t), http.MethodPost, "/v1/desktops/"+d.ID+"/computer/anthropic", json.RawMessage(turn), &out); err != nil {
					t.Fatal(err)
				}
				for _, r := range out.Content {
					if r.IsError {
						t.Fatalf("turn: %+v", out.Content)
					}
				}
			case "gemini":
				fx, fy := grid(field)
				gx, gy := grid(goButton)
				calls := fmt.Sprintf(`[
				  {"name": "type_text_at", "args": {"x": %d, "y": %d, "text": %q, "press_enter": false, "clear_before_typing": false}},
				  {"name": "click_at", "args": {"x": %d, "y": %d}}]`, fx, fy, word, gx, gy)
				var out api.GeminiTurnResult
				if err := s.c.Do(s.ctx(t), http.MethodPost, "/v1/desktops/"+d.ID+"/computer/gemini", json.RawMessage(calls), &out); err != nil {
					t.Fatal(err)
				}
				for _, p := range out.Parts {
					if p.FunctionResponse.Response["error"] != nil {
						t.Fatalf("gemini: %+v", p.FunctionResponse.Response)
					}
				}
			case "mcp":
				for _, args := range []map[string]any{
					{"desktop_id": d.ID, "action": "left_click", "coordinate": []int{field.X, field.Y}},
					{"desktop_id": d.ID, "action": "type", "text": word},
					{"desktop_id": d.ID, "action": "left_click", "coordinate": []int{goButton.X, goButton.Y}},
				} {
					res, err := session.CallTool(s.ctx(t), &mcp.CallToolParams{Name: "computer", Arguments: args})
					if err != nil || res.IsError {
						t.Fatalf("mcp computer %v: %v %+v", args, err, res)
					}
				}
			}
			if title := s.chromiumTitle(t, d.ID); title == "clicked: "+word {
				landed++
			} else {
				others = append(others, fmt.Sprintf("%q", title))
			}
			if err := s.c.DeleteDesktop(s.ctx(t), d.ID); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: the text landed in %d of %d trials", door, landed, n)
		if landed != n {
			t.Errorf("%s: the text landed in %d of %d trials; the others' titles: %s", door, landed, n, strings.Join(others, ", "))
		}
	}
}

// mcpSessionFor opens an MCP session on the stack's /mcp with its token.
func mcpSessionFor(t *testing.T, s *actionStack) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-e2e", Version: "0"}, nil)
	cs, err := c.Connect(s.ctx(t), &mcp.StreamableClientTransport{
		Endpoint: s.c.BaseURL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: tokenTransport(s.c.Token)},
	}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// tokenTransport sets the bearer token on every request.
type tokenTransport string

func (tok tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func TestClickTheOtherXtermThenType(t *testing.T) {
	s := startStackOn(t, images.FlavorMinimal)
	// A second xterm beside the first (which sits at 40,40, 100x30 cells).
	if res := s.shell(t, "DISPLAY=:0 setsid xterm -fa 'DejaVu Sans Mono' -fs 11 -geometry 60x20+700+420 -title second -e bash </dev/null >/dev/null 2>&1 & "+
		"DISPLAY=:0 xdotool search --sync --onlyvisible --name '^second$' >/dev/null"); res.ExitCode != 0 {
		t.Fatalf("second xterm: exit %d %s", res.ExitCode, res.Stderr)
	}
	// Points inside each terminal's text area.
	terms := []image.Point{{X: 300, Y: 300}, {X: 900, Y: 560}}
	n := trials(t)
	landed := 0
	var missed []string
	for i := range n {
		at := terms[i%2] // the one that is not focused: the other had the last command
		s.anthropic(t, s.id, fmt.Sprintf(`{"action": "left_click", "coordinate": [%d, %d]}`, at.X, at.Y))
		s.anthropic(t, s.id, fmt.Sprintf(`{"action": "type", "text": "echo %d > /tmp/trial-%d\n"}`, i, i))
		var buf strings.Builder
		got := func() bool {
			buf.Reset()
			_, err := s.c.ReadFile(s.ctx(t), s.id, fmt.Sprintf("/tmp/trial-%d", i), &buf)
			return err == nil && buf.String() == fmt.Sprintf("%d\n", i)
		}
		if testenv.Poll(20*time.Second, 50*time.Millisecond, time.Second, got) {
			landed++
		} else {
			missed = append(missed, strconv.Itoa(i))
		}
	}
	t.Logf("xterm: the command ran in %d of %d trials", landed, n)
	if landed != n {
		t.Errorf("the command ran in %d of %d trials; missed: %s", landed, n, strings.Join(missed, " "))
	}
}

func TestRightClickMenuShowsThenEscapeCloses(t *testing.T) {
	s := startStackOn(t, images.FlavorMinimal)
	// The root window: below the xterm, which spans about 40..760 x 40..540.
	at := image.Pt(1000, 700)
	menu := image.Rect(at.X, at.Y-300, min(at.X+300, 1280), 800) // where openbox may draw it
	n := min(trials(t), 20)
	shown, closed := 0, 0
	var late []string
	for i := range n {
		res := s.anthropic(t, s.id, fmt.Sprintf(`{"action": "right_click", "coordinate": [%d, %d]}`, at.X, at.Y))
		if img := toolResultImage(t, res); share(img, menu, background) < 0.9 {
			shown++
		} else {
			// Lost, or drawn after the screenshot? A settled screenshot
			// tells the two apart for the report.
			later := s.anthropic(t, s.id, `{"action": "wait", "duration": 1}`)
			if share(toolResultImage(t, later), menu, background) < 0.9 {
				late = append(late, fmt.Sprintf("trial %d: the menu came after the screenshot", i+1))
			} else {
				late = append(late, fmt.Sprintf("trial %d: no menu at all", i+1))
			}
		}
		res = s.anthropic(t, s.id, `{"action": "key", "text": "Escape"}`)
		if img := toolResultImage(t, res); share(img, menu, background) > 0.97 {
			closed++
		}
	}
	t.Logf("right-click menu: shown in %d, closed in %d of %d trials", shown, closed, n)
	if shown != n || closed != n {
		t.Errorf("the right-click's screenshot showed the menu %d of %d times (%s), Escape's showed it closed %d of %d times", shown, n, strings.Join(late, "; "), closed, n)
	}
}

// toolResultImage decodes a tool result's screenshot.
func toolResultImage(t *testing.T, res input.AnthropicToolResult) *image.RGBA {
	t.Helper()
	for _, b := range res.Content {
		if b.Type == "image" && b.Source != nil {
			return decodeBase64PNG(t, b.Source.Data)
		}
	}
	t.Fatalf("tool result without a screenshot: %+v", res)
	return nil
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

func decodeBase64PNG(t *testing.T, data string) *image.RGBA {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatal(err)
	}
	return decodePNG(t, raw)
}

// shellOn runs a command line on a desktop through the exec endpoint.
func (s *actionStack) shellOn(t *testing.T, id, line string) api.ExecResponse {
	t.Helper()
	res, err := s.c.Exec(s.ctx(t), id, api.ExecRequest{Shell: line, Timeout: api.Duration(20 * time.Second)})
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return res
}
