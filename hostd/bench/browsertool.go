package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// browsertoolForm is the form both toolsets fill. Each control has a
// colour of its own, for the computer toolset's turn to find it on the
// screen; Send shows what was sent, which is how a turn's effect is checked.
const browsertoolForm = `<!doctype html><title>bench form</title>
<style>body{margin:16px;font:16px sans-serif;background:#fff}
.f{display:block;width:320px;height:34px;border:0;outline:none;margin:2px 0 10px;padding:0 8px;font:16px sans-serif;color:#000}</style>
<label>Name <input class=f id=f1 style="background:#ff00ff"></label>
<label>Email <input class=f id=f2 style="background:#00ffff"></label>
<label>City <input class=f id=f3 style="background:#ffff00"></label>
<label>Note <input class=f id=f4 style="background:#00ff00"></label>
<label class=f style="background:#ff8000;line-height:34px"><input type=checkbox id=sub> Subscribe</label>
<button class=f id=send style="background:#0000ff;color:#fff" onclick="out.textContent = 'Sent ' +
 [f1.value, f2.value, f3.value, f4.value].join(' ') + ' subscribed ' + sub.checked">Send</button>
<p id=out></p>`

// browsertoolControls are the form's controls: their accessible names
// (what read_page lists) and colours, in the order they are filled.
var browsertoolControls = []struct {
	role, name string
	colour     color.RGBA
}{
	{"textbox", "Name", color.RGBA{0xff, 0x00, 0xff, 0xff}},
	{"textbox", "Email", color.RGBA{0x00, 0xff, 0xff, 0xff}},
	{"textbox", "City", color.RGBA{0xff, 0xff, 0x00, 0xff}},
	{"textbox", "Note", color.RGBA{0x00, 0xff, 0x00, 0xff}},
	{"checkbox", "Subscribe", color.RGBA{0xff, 0x80, 0x00, 0xff}},
	{"button", "Send", color.RGBA{0x00, 0x00, 0xff, 0xff}},
}

// browsertoolMembers are the members timed one call at a time,
// in the order a sample calls them.
var browsertoolMembers = []string{"navigate", "read_page", "screenshot", "click_ref"}

// browsertoolKeys are the suite's documented keys.
var browsertoolKeys = []string{"browsertool_navigate_p50_ms", "browsertool_read_page_p50_ms", "browsertool_screenshot_p50_ms", "browsertool_click_ref_p50_ms",
	"browsertool_form_turn_p50_ms", "computer_form_turn_p50_ms", "browsertool_form_turn_over_computer_ratio",
	"browsertool_form_turn_misses", "computer_form_turn_misses", "browsertool_first_navigate_ms"}

// browsertoolSuite measures Anthropic's browser toolset on one browser
// desktop that reaches a form on the host's loopback, o.N samples of: one
// call each of navigate, read_page, screenshot and left_click by ref; the
// form filled in one turn of 10 calls by refs, beside the same form filled
// by pixels in one computer toolset turn. A turn whose page did not say
// what was sent is a miss: noted, counted, not timed.
func (e *env) browsertoolSuite(ctx context.Context) error {
	snap, ok, err := e.browserSnapshot(browsertoolKeys[0])
	if !ok {
		for _, k := range browsertoolKeys[1:] {
			e.res.null(k, "no browser snapshot (see "+browsertoolKeys[0]+")")
		}
	}
	if !ok || err != nil {
		return err
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, browsertoolForm) }))
	defer page.Close()
	port := page.Listener.Addr().(*net.TCPAddr).Port
	srv, c := e.serve(ctx)
	defer srv.Close()
	d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap.Name, Network: api.NetworkPolicy{Mode: "allow", Allow: []string{fmt.Sprintf("host:%d", port)}}})
	if err != nil {
		return err
	}
	defer c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	scr, ok := e.screens.Get(d.ID)
	if !ok {
		return fmt.Errorf("desktop %s has no screen", d.ID)
	}
	b := &btRun{e: e, c: c, id: d.ID, form: fmt.Sprintf("http://host:%d/", port), scr: scr}
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	for i := range max(1, e.opts.N) {
		if err := b.sample(ctx, i); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	for m, name := range browsertoolMembers {
		e.res.distOrNull("browsertool_"+name, &b.members[m])
	}
	e.res.distOrNull("browsertool_form_turn", &b.browserTurn.Dist)
	e.res.distOrNull("computer_form_turn", &b.computerTurn.Dist)
	e.res.set("browsertool_form_turn_misses", float64(b.browserTurn.misses))
	e.res.set("computer_form_turn_misses", float64(b.computerTurn.misses))
	if bt, ct := b.browserTurn.Percentile(50), b.computerTurn.Percentile(50); bt > 0 && ct > 0 {
		e.res.set("browsertool_form_turn_over_computer_ratio", float64(bt)/float64(ct))
	} else {
		e.res.null("browsertool_form_turn_over_computer_ratio", "a form turn has no sample (see the misses)")
	}
	e.progress("  form turn p50: browser toolset by refs %s, computer toolset by pixels %s", b.browserTurn.Percentile(50), b.computerTurn.Percentile(50))
	return nil
}

// distOrNull sets a distribution's keys, or its p50 null without samples.
func (r *Result) distOrNull(prefix string, d *Dist) {
	if d.N() == 0 {
		r.null(prefix+"_p50_ms", "no sample succeeded (the misses are in the notes)")
		return
	}
	r.dist(prefix, d)
}

// btRun is one run of the suite on its desktop: scr is its screen, at the
// controls' centres on it, for the computer toolset, and box the first
// text field's, to tell a fresh form.
type btRun struct {
	e                         *env
	c                         *client.Client
	id, form                  string
	scr                       *drive.Mirror
	at                        []image.Point
	box                       image.Rectangle
	members                   [4]Dist // browsertoolMembers'
	browserTurn, computerTurn btTurns
}

// btTurns are the form turns that had their effect, and the misses.
type btTurns struct {
	Dist
	misses int
}

// miss notes a sample that failed under key, and whether the run can go
// on: only a failed request (not a failed call) ends it.
func (b *btRun) miss(key string, i int, err error) error {
	if !errors.As(err, new(*toolFailed)) {
		return err
	}
	b.e.res.note(fmt.Sprintf("%s: sample %d missed: %v", key, i, err))
	return nil
}

// warmUp connects the toolset, opens the form once (a new site's first
// navigation starts its renderer, 15 s or more under TCG, which is not a
// navigate's usual time) and finds the controls on the screen.
func (b *btRun) warmUp(ctx context.Context) error {
	if _, _, err := b.turn(ctx, btCall{name: browsertool.ListTabs}); err != nil {
		return fmt.Errorf("connect the browser toolset: %w", err)
	}
	// A navigation that did not commit within its 30 s is tried again.
	nav := btCall{browsertool.Navigate, map[string]any{"url": b.form}}
	_, took, err := b.turn(ctx, nav)
	for try := 1; try < 3 && errors.As(err, new(*toolFailed)); try++ {
		b.e.res.note(fmt.Sprintf("browsertool_first_navigate_ms: try %d failed, tried again: %v", try, err))
		_, took, err = b.turn(ctx, nav)
	}
	if err != nil {
		return fmt.Errorf("open the form: %w", err)
	}
	b.e.res.set("browsertool_first_navigate_ms", ms(took))
	return b.findControls(ctx)
}

// findControls waits for the form on the screen, each control by colour.
func (b *btRun) findControls(ctx context.Context) error {
	boxes := make([]image.Rectangle, len(browsertoolControls))
	if !poll(ctx, time.Minute, func() bool {
		img, seq := b.scr.Mirror.Frame(nil)
		if clear(boxes); seq == 0 {
			return false
		}
		for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
			for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
				for i, c := range browsertoolControls {
					if near(img.RGBAAt(x, y), c.colour) {
						boxes[i] = boxes[i].Union(image.Rect(x, y, x+1, y+1))
					}
				}
			}
		}
		return !slices.ContainsFunc(boxes, func(r image.Rectangle) bool { return r.Dx() < 100 || r.Dy() < 20 })
	}) {
		return fmt.Errorf("desktop %s: the form's controls never showed on the screen (boxes %v)", b.id, boxes)
	}
	for _, r := range boxes {
		b.at = append(b.at, image.Pt((r.Min.X+r.Max.X)/2, (r.Min.Y+r.Max.Y)/2))
	}
	b.box = boxes[0]
	return nil
}

// sample times one call of each member, then the form through each way.
func (b *btRun) sample(ctx context.Context, i int) error {
	var refs []string
	calls := map[string]func() btCall{
		"navigate": func() btCall {
			return btCall{browsertool.Navigate, map[string]any{"url": fmt.Sprintf("%s?sample=%d", b.form, i)}}
		},
		"read_page":  func() btCall { return btCall{browsertool.ReadPage, map[string]any{"filter": "interactive"}} },
		"screenshot": func() btCall { return btCall{name: browsertool.Screenshot} },
		"click_ref":  func() btCall { return btCall{browsertool.LeftClick, byRef(refs[0])} }, // the Name field
	}
	for m, name := range browsertoolMembers {
		res, took, err := b.turn(ctx, calls[name]())
		if err == nil && name == "read_page" {
			refs, err = formRefs(resultText(res[0]))
		}
		if err != nil {
			return b.miss("browsertool_"+name+"_p50_ms", i, err)
		}
		b.members[m].Add(took)
	}
	took, err := b.browserForm(ctx, refs, formWords("b", i))
	if err = b.counted(&b.browserTurn, "browsertool_form_turn_p50_ms", i, took, err); err != nil {
		return err
	}
	took, err = b.computerForm(ctx, i, formWords("c", i))
	return b.counted(&b.computerTurn, "computer_form_turn_p50_ms", i, took, err)
}

// counted counts a form turn: its time, or a miss noted under key.
func (b *btRun) counted(into *btTurns, key string, i int, took time.Duration, err error) error {
	if err != nil {
		into.misses++
		return b.miss(key, i, err)
	}
	into.Add(took)
	return nil
}

// formWords are a sample's words for the four fields, prefixed by way.
func formWords(p string, i int) []string {
	return strings.Fields(fmt.Sprintf("%[1]sada%[2]d %[1]smail%[2]d %[1]sparis%[2]d %[1]snote%[2]d", p, i))
}

// sentText is what the page says once words were sent, subscribed.
func sentText(words []string) string { return "Sent " + strings.Join(words, " ") + " subscribed true" }

// browserForm fills the form by refs in one turn of 10 calls: a click and
// the text for three fields, form_input for the fourth and the checkbox,
// a click on Send, and the page's text, which must say what was sent.
func (b *btRun) browserForm(ctx context.Context, refs, words []string) (time.Duration, error) {
	var calls []btCall
	for f := range 3 {
		calls = append(calls, btCall{browsertool.LeftClick, byRef(refs[f])}, btCall{browsertool.Type, map[string]any{"text": words[f]}})
	}
	calls = append(calls, formInput(refs[3], words[3]), formInput(refs[4], true), btCall{browsertool.LeftClick, byRef(refs[5])}, btCall{name: browsertool.GetPageText})
	res, took, err := b.turn(ctx, calls...)
	if said := ""; err == nil {
		if said = resultText(res[len(res)-1]); !strings.Contains(said, sentText(words)) {
			err = &toolFailed{fmt.Sprintf("get_page_text said %.300q, want %q", said, sentText(words))}
		}
	}
	return took, err
}

// computerForm loads the form afresh, waits for the screen to show it
// (the first field empty), and fills it by pixels in one computer turn:
// a click and the text for each field, a click on the checkbox's label and
// on Send, a screenshot. Its effect is read with get_page_text, untimed.
func (b *btRun) computerForm(ctx context.Context, i int, words []string) (time.Duration, error) {
	if _, _, err := b.turn(ctx, btCall{browsertool.Navigate, map[string]any{"url": fmt.Sprintf("%s?computer=%d", b.form, i)}}); err != nil {
		return 0, err
	}
	empty := image.Rect(b.box.Min.X+2, b.box.Min.Y+4, b.box.Min.X+120, b.box.Max.Y-4)
	if !poll(ctx, 30*time.Second, func() bool {
		img, seq := b.scr.Mirror.Frame(nil)
		return seq > 0 && share(img, empty, browsertoolControls[0].colour) > 0.99
	}) {
		return 0, &toolFailed{"the screen never showed the form afresh"}
	}
	var calls []btCall
	click := func(p image.Point) btCall {
		return btCall{"computer", map[string]any{"action": "left_click", "coordinate": []int{p.X, p.Y}}}
	}
	for f, w := range words {
		calls = append(calls, click(b.at[f]), btCall{"computer", map[string]any{"action": "type", "text": w}})
	}
	calls = append(calls, click(b.at[4]), click(b.at[5]), btCall{"computer", map[string]any{"action": "screenshot"}})
	var out api.AnthropicTurnResult
	start := time.Now()
	if err := b.c.Do(ctx, http.MethodPost, "/v1/desktops/"+b.id+"/computer/anthropic", toolUses("", calls), &out); err != nil {
		return 0, fmt.Errorf("computer turn: %w", err)
	}
	took := time.Since(start)
	if n := slices.IndexFunc(out.Content, func(r input.AnthropicToolResult) bool { return r.IsError }); n >= 0 {
		return took, &toolFailed{fmt.Sprintf("call %d answered an error: %+v", n, out.Content[n].Content)}
	}
	var said string
	if !poll(ctx, 30*time.Second, func() bool {
		if res, _, err := b.turn(ctx, btCall{name: browsertool.GetPageText}); err == nil {
			said = resultText(res[0])
		}
		return strings.Contains(said, sentText(words))
	}) {
		return took, &toolFailed{fmt.Sprintf("the page said %.300q, want %q", said, sentText(words))}
	}
	return took, nil
}

// btCall is one call of a turn: a member of the browser toolset, or the
// computer tool with its action in input.
type btCall struct {
	name  string
	input map[string]any
}

// toolUses is an assistant turn's content: a tool_use block for each
// call, of toolset when it is set.
func toolUses(toolset string, calls []btCall) json.RawMessage {
	blocks := make([]map[string]any, len(calls))
	for i, c := range calls {
		blocks[i] = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", i), "name": c.name, "input": c.input}
		if c.input == nil {
			blocks[i]["input"] = struct{}{}
		}
		if toolset != "" {
			blocks[i]["toolset_name"] = toolset
		}
	}
	body, _ := json.Marshal(blocks) // maps of strings, numbers and bools
	return body
}

// turn posts one turn of browser calls and times its round trip. A call
// that failed is a *toolFailed; a request that failed, another error.
func (b *btRun) turn(ctx context.Context, calls ...btCall) ([]browsertool.ToolResult, time.Duration, error) {
	start := time.Now()
	res, failed, err := b.c.BrowserTurn(ctx, b.id, toolUses(browsertool.ToolsetName, calls))
	took := time.Since(start)
	if err != nil {
		return nil, took, fmt.Errorf("browser turn: %w", err)
	}
	switch {
	case failed >= 0 && failed < len(res.Content):
		err = &toolFailed{fmt.Sprintf("%s failed: %.300s", calls[failed].name, resultText(res.Content[failed]))}
	case len(res.Content) != len(calls):
		err = &toolFailed{fmt.Sprintf("%d results for %d calls", len(res.Content), len(calls))}
	}
	return res.Content, took, err
}

// toolFailed is a call that answered is_error, or a turn without its
// effect: a miss of the sample, not the end of the run.
type toolFailed struct{ why string }

func (f *toolFailed) Error() string { return f.why }

// resultText is a tool result's first text block.
func resultText(r browsertool.ToolResult) string {
	for _, b := range r.Content {
		if b.Type == "text" {
			return b.Text
		}
	}
	return ""
}

// byRef is a click's input aiming at an element by its ref.
func byRef(ref string) map[string]any {
	return map[string]any{"target": map[string]any{"type": "ref", "ref": ref}}
}

// formInput sets the control of ref to v.
func formInput(ref string, v any) btCall {
	in := byRef(ref)
	in["value"] = v
	return btCall{browsertool.FormInput, in}
}

// formRefs finds the controls' refs in read_page's answer, in
// browsertoolControls' order.
func formRefs(tree string) ([]string, error) {
	var refs []string
	for _, c := range browsertoolControls {
		m := regexp.MustCompile(regexp.QuoteMeta(c.role) + ` "` + regexp.QuoteMeta(c.name) + `"[^\n]*\[(ref_[0-9]+)\]`).FindStringSubmatch(tree)
		if m == nil {
			return nil, &toolFailed{fmt.Sprintf("no %s %q in read_page's answer: %.300q", c.role, c.name, tree)}
		}
		refs = append(refs, m[1])
	}
	return refs, nil
}
