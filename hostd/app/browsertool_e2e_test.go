package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/desktop"
)

// toolsetPage is a form on the host's loopback: filled by refs, it shows
// what was sent in place; it logs to the console on load.
const toolsetPage = `<!doctype html><title>toolset form</title>
<h1>Sign up</h1>
<label>Name <input id=fullname></label>
<label>Color <select id=color><option value=r>Red</option><option value=b>Blue</option></select></label>
<label><input type=checkbox id=sub> Subscribe</label>
<button id=send onclick="out.textContent = 'Thanks ' + fullname.value + ', color ' + color.value + ', subscribed ' + sub.checked">Send</button>
<p id=out></p>
<script>console.log("form ready")</script>`

// Anthropic's browser toolset on a browser desktop's Chromium, through
// POST /v1/desktops/{id}/browser/anthropic: a form filled by the refs
// read_page gave, submitted and read back with get_page_text; a ref made
// stale by a navigation refused in the middle of a turn, the rest not
// executed; tabs opened, listed, switched and closed with browser_state as
// the reference requires; javascript_exec and read_console only once the
// configs enable them; a person's control refusing a click.
func TestBrowserToolsetEndToEnd(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/other" {
			io.WriteString(w, "<title>other page</title><p>another page")
			return
		}
		io.WriteString(w, toolsetPage)
	}))
	t.Cleanup(page.Close)
	port := portOf(t, page.URL)
	cfg, snap := hostConfig(t, "qemu", "browser")
	h := openHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap, Network: api.NetworkPolicy{Mode: "allow", Allow: []string{"host:" + strconv.Itoa(port)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	events, stopEvents := h.a.Manager.Events().Subscribe()
	defer stopEvents()
	form := fmt.Sprintf("http://host:%d/", port)

	turn := func(t *testing.T, body string) (api.BrowserTurnResult, int) {
		t.Helper()
		start := time.Now()
		res, failed, err := h.c.BrowserTurn(ctx, d.ID, json.RawMessage(body))
		if err != nil {
			t.Fatalf("turn %s: %v", body, err)
		}
		t.Logf("turn of %d in %s", len(res.Content), time.Since(start).Round(time.Millisecond))
		return res, failed
	}
	use := func(id, name, input string) string {
		return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"toolset_name":"browser","input":%s}`, id, name, input)
	}
	text := func(r browsertool.ToolResult) string {
		for _, b := range r.Content {
			if b.Type == "text" {
				return b.Text
			}
		}
		return ""
	}
	state := func(r browsertool.ToolResult) *browsertool.BrowserState {
		for _, b := range r.Content {
			if b.Type == "browser_state" {
				return b.BrowserState
			}
		}
		return nil
	}

	// The first turn connects to the desktop's Chromium.
	res, failed := turn(t, "["+use("l0", "list_tabs", `{}`)+"]")
	if st := state(res.Content[0]); failed != -1 || st == nil || len(st.Tabs) == 0 {
		t.Fatalf("list_tabs on a fresh desktop: %+v", res)
	}

	// Navigate, then read the interactive elements.
	res, failed = turn(t, "["+use("n", "navigate", `{"url":"`+form+`"}`)+","+use("r", "read_page", `{"filter":"interactive"}`)+"]")
	if failed != -1 || len(res.Content) != 2 || res.Content[0].IsError || res.Content[1].IsError {
		t.Fatalf("navigate and read_page: %+v", res)
	}
	if st := state(res.Content[0]); st == nil || len(st.Tabs) != 1 || !st.Tabs[0].Active || st.Tabs[0].URL != form {
		t.Errorf("navigate's browser_state: %+v, want one active tab at %s", st, form)
	}
	tree := text(res.Content[1])
	t.Logf("read_page:\n%s", tree)
	refOf := func(role, name string) string {
		m := regexp.MustCompile(regexp.QuoteMeta(role) + ` "` + regexp.QuoteMeta(name) + `"[^\n]*\[(ref_[0-9]+)\]`).FindStringSubmatch(tree)
		if m == nil {
			t.Fatalf("no %s %q in read_page's answer", role, name)
		}
		return m[1]
	}
	name, color, sub, send := refOf("textbox", "Name"), refOf("combobox", "Color"), refOf("checkbox", "Subscribe"), refOf("button", "Send")

	// Fill the form by refs, submit, read the page.
	target := func(ref string) string { return `{"type":"ref","ref":"` + ref + `"}` }
	res, failed = turn(t, "["+strings.Join([]string{
		use("f1", "form_input", `{"target":`+target(name)+`,"value":"Ada"}`),
		use("f2", "form_input", `{"target":`+target(color)+`,"value":"Blue"}`),
		use("f3", "form_input", `{"target":`+target(sub)+`,"value":true}`),
		use("c", "left_click", `{"target":`+target(send)+`}`),
		use("g", "get_page_text", `{}`),
	}, ",")+"]")
	if failed != -1 {
		t.Fatalf("the form turn failed at %d: %+v", failed, res)
	}
	if got := text(res.Content[3]); got != "Clicked element "+send+"." {
		t.Errorf("left_click answered %q", got)
	}
	if got := text(res.Content[4]); !strings.Contains(got, "Thanks Ada, color b, subscribed true") {
		t.Errorf("get_page_text after the submit: %q", got)
	}

	// A navigation makes the refs stale: a turn stops at the click.
	res, failed = turn(t, "["+strings.Join([]string{
		use("n2", "navigate", fmt.Sprintf(`{"url":"http://host:%d/other"}`, port)),
		use("c2", "left_click", `{"target":`+target(send)+`}`),
		use("k2", "key", `{"text":"Enter"}`),
	}, ",")+"]")
	if failed != 1 || !res.Content[1].IsError || !strings.Contains(text(res.Content[1]), send+" is stale or not found") {
		t.Errorf("a stale ref: failed %d, %+v", failed, res.Content[1])
	}
	if r := res.Content[2]; !r.IsError || text(r) != browsertool.NotExecuted || r.ToolsetName != "browser" {
		t.Errorf("the call after the failure: %+v", r)
	}

	// Tabs: every tab member answers exactly one browser_state block.
	res, failed = turn(t, "["+use("t1", "new_tab", `{}`)+","+use("t2", "list_tabs", `{}`)+"]")
	if failed != -1 {
		t.Fatalf("new_tab, list_tabs: %+v", res)
	}
	for _, r := range res.Content {
		if len(r.Content) != 1 || r.Content[0].Type != "browser_state" {
			t.Errorf("%s answered %+v, want exactly one browser_state block", r.ToolUseID, r.Content)
		}
	}
	opened := state(res.Content[0])
	if opened == nil || len(opened.Tabs) != 2 || len(opened.StateChanges) != 1 || opened.StateChanges[0].Type != "tab_opened" {
		t.Fatalf("new_tab's state: %+v", opened)
	}
	newID := opened.StateChanges[0].TabID
	if listed := state(res.Content[1]); listed == nil || len(listed.Tabs) != 2 || listed.StateChanges != nil {
		t.Errorf("list_tabs' state: %+v", listed)
	}
	first := opened.Tabs[0].TabID
	res, failed = turn(t, "["+use("s", "switch_tab", `{"tab_id":"`+first+`"}`)+","+use("x", "close_tab", `{"tab_id":"`+newID+`"}`)+"]")
	if failed != -1 {
		t.Fatalf("switch_tab, close_tab: %+v", res)
	}
	if st := state(res.Content[1]); st == nil || len(st.Tabs) != 1 || st.Tabs[0].TabID != first || !st.Tabs[0].Active {
		t.Errorf("after close_tab: %+v", st)
	}

	// The optional members: refused until the configs enable them.
	js := use("j", "javascript_exec", `{"text":"6 * 7"}`)
	res, failed = turn(t, "["+js+"]")
	if failed != 0 || !strings.Contains(text(res.Content[0]), "javascript_exec is not enabled") {
		t.Errorf("javascript_exec off by default: %+v", res)
	}
	enabled := `{"tools":[{"type":"browser_toolset_20260801","configs":{"javascript_exec":{"enabled":true},"read_console":{"enabled":true}}}],"content":[` +
		use("n3", "navigate", `{"url":"`+form+`"}`) + "," + js + "," + use("rc", "read_console", `{}`) + "," + use("sc", "screenshot", `{}`) + "]}"
	res, failed = turn(t, enabled)
	if failed != -1 || text(res.Content[1]) != "42" || !strings.Contains(text(res.Content[2]), "form ready") {
		t.Errorf("enabled javascript_exec and read_console: failed %d, %q, %q", failed, text(res.Content[1]), text(res.Content[2]))
	}
	if c := res.Content[3].Content; len(c) != 1 || c[0].Type != "image" || c[0].Source == nil || c[0].Source.Data == "" {
		t.Errorf("screenshot answered %+v", c)
	}

	// A person holding control refuses a browser click, as every input.
	if err := h.c.Do(ctx, http.MethodPost, "/v1/desktops/"+d.ID+"/control", api.SetControl{Holder: "person", By: "tester"}, nil); err != nil {
		t.Fatal(err)
	}
	res, failed = turn(t, "["+use("p", "left_click", `{"target":{"type":"coordinate","x":10,"y":10}}`)+"]")
	if failed != 0 || !strings.Contains(text(res.Content[0]), "tester took control") {
		t.Errorf("a click under a person's control: %+v", res)
	}
	if err := h.c.Do(ctx, http.MethodPost, "/v1/desktops/"+d.ID+"/control", api.SetControl{Holder: "agent"}, nil); err != nil {
		t.Fatal(err)
	}
	// Every call that ran is in the desktop's action log, the failed ones
	// saying why; the calls not executed are not.
	var log []string
	for len(events) > 0 {
		ev := <-events
		if ev.Type == desktop.EventAction && ev.Desktop.ID == d.ID && strings.HasPrefix(ev.Summary, "agent: browser ") {
			log = append(log, ev.Summary)
		}
	}
	joined := strings.Join(log, "\n")
	for _, want := range []string{"agent: browser form_input", "agent: browser left_click {\"target\":{\"type\":\"ref\",\"ref\":\"" + send + "\"}} (failed: Error: " + send + " is stale", "tester took control"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the action log has no %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "browser key") {
		t.Errorf("a call not executed is in the action log:\n%s", joined)
	}
}
