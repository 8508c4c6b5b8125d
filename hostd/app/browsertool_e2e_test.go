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
// what was sent in place, and the name and size of a file attached; it
// logs to the console on load, and links a report that downloads.
const toolsetPage = `<!doctype html><title>toolset form</title>
<h1>Sign up</h1>
<label>Name <input id=fullname></label>
<label>Color <select id=color><option value=r>Red</option><option value=b>Blue</option></select></label>
<label><input type=checkbox id=sub> Subscribe</label>
<button id=send onclick="out.textContent = 'Thanks ' + fullname.value + ', color ' + color.value + ', subscribed ' + sub.checked">Send</button>
<label>Attachment <input type=file id=up onchange="out.textContent = 'attached ' + up.files[0].name + ' of ' + up.files[0].size + ' bytes'"></label>
<a href=/report.csv>Report</a>
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
		if r.URL.Path == "/report.csv" {
			w.Header().Set("Content-Type", "text/csv")
			w.Header().Set("Content-Disposition", `attachment; filename="report.csv"`)
			io.WriteString(w, reportCSV)
			return
		}
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
	use, text, state := browserUse, resultText, resultState

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

	t.Run("files and the network", func(t *testing.T) { filesAndNetwork(ctx, t, h, d.ID, form) })
	t.Run("over MCP", func(t *testing.T) { browserOverMCP(ctx, t, h, d.ID, form) })

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

	// After a reset the toolset reaches the new guest's Chromium, its
	// tabs named afresh: the start page, none of the pages above.
	if _, err := h.c.Reset(ctx, d.ID, api.Reset{}); err != nil {
		t.Fatal(err)
	}
	res, failed = turn(t, "["+use("a", "list_tabs", `{}`)+"]")
	st := state(res.Content[0])
	if failed != -1 || st == nil || len(st.Tabs) != 1 || !strings.HasPrefix(st.Tabs[0].URL, "file://") {
		t.Errorf("list_tabs after a reset: %+v", res)
	}
}

const reportCSV = "region,total\nnorth,12\nsouth,30\n"

// filesAndNetwork: a file put into the desktop attached by file_upload; the
// form page's requests in read_network; the report link's download
// reported (started, then completed with where it was saved and its size)
// and its file in the desktop; a turn of both toolsets run in order.
func filesAndNetwork(ctx context.Context, t *testing.T, h *host, id, form string) {
	use, text, state := browserUse, resultText, resultState
	turn := func(body string) (api.BrowserTurnResult, int) {
		t.Helper()
		res, failed, err := h.c.BrowserTurn(ctx, id, json.RawMessage(body))
		if err != nil {
			t.Fatalf("turn %s: %v", body, err)
		}
		return res, failed
	}
	const attachment = "fourteen bytes"
	if _, err := h.c.WriteFile(ctx, id, "/tmp/notes.txt", strings.NewReader(attachment)); err != nil {
		t.Fatal(err)
	}
	optional := func(calls ...string) string {
		return `{"tools":[{"type":"browser_toolset_20260801","configs":{"file_upload":{"enabled":true},"read_network":{"enabled":true}}}],"content":[` + strings.Join(calls, ",") + "]}"
	}
	res, failed := turn(optional(use("n", "navigate", `{"url":"`+form+`"}`), use("r", "find", `{"query":"Attachment"}`), use("w", "read_network", `{}`)))
	if failed != -1 {
		t.Fatalf("navigate, find, read_network: %+v", res)
	}
	if got := text(res.Content[2]); !strings.Contains(got, "GET "+form+" 200 text/html") {
		t.Errorf("read_network after the navigation:\n%s", got)
	}
	found := text(res.Content[1])
	m := regexp.MustCompile(`"Attachment"[^\n]*\[(ref_[0-9]+)\]`).FindStringSubmatch(found)
	if m == nil {
		t.Fatalf("find Attachment answered:\n%s", found)
	}
	upload := `{"target":{"type":"ref","ref":"` + m[1] + `"},"paths":["/tmp/notes.txt"]}`
	res, failed = turn(optional(use("u", "file_upload", upload), use("g", "get_page_text", `{}`),
		use("u2", "file_upload", `{"target":{"type":"ref","ref":"`+m[1]+`"},"paths":["/tmp/not-there.txt"]}`)))
	if failed != 2 || !strings.Contains(text(res.Content[1]), fmt.Sprintf("attached notes.txt of %d bytes", len(attachment))) {
		t.Errorf("file_upload: failed %d, page %q", failed, text(res.Content[1]))
	}
	if got := text(res.Content[2]); !strings.Contains(got, "/tmp/not-there.txt") {
		t.Errorf("a file not in the desktop: %q", got)
	}

	// The report link downloads: reported on the results that follow.
	read, _ := turn("[" + use("r2", "find", `{"query":"Report"}`) + "]")
	m = regexp.MustCompile(`"Report"[^\n]*\[(ref_[0-9]+)\]`).FindStringSubmatch(text(read.Content[0]))
	if m == nil {
		t.Fatalf("find Report answered:\n%s", text(read.Content[0]))
	}
	res, failed = turn("[" + use("d", "left_click", `{"target":{"type":"ref","ref":"`+m[1]+`"}}`) + "]")
	if failed != -1 {
		t.Fatalf("click the report link: %+v", res)
	}
	var changes []browsertool.StateChange
	if st := state(res.Content[0]); st != nil {
		changes = append(changes, st.StateChanges...)
	}
	completed := func() *browsertool.StateChange {
		for i := range changes {
			if changes[i].Type == "download_completed" {
				return &changes[i]
			}
		}
		return nil
	}
	deadline := time.Now().Add(time.Minute)
	for completed() == nil && time.Now().Before(deadline) {
		res, _ = turn("[" + use("w", "wait", `{"duration":0.5}`) + "]")
		if st := state(res.Content[0]); st != nil {
			changes = append(changes, st.StateChanges...)
		}
	}
	done := completed()
	if done == nil || done.SizeBytes == nil || *done.SizeBytes != int64(len(reportCSV)) || !strings.HasSuffix(done.Path, "/report.csv") {
		t.Fatalf("the download's changes: %+v", changes)
	}
	if changes[0].Type != "download_started" || changes[0].DownloadID != done.DownloadID {
		t.Errorf("the download's first change: %+v", changes[0])
	}
	var saved strings.Builder
	if _, err := h.c.ReadFile(ctx, id, done.Path, &saved); err != nil || saved.String() != reportCSV {
		t.Errorf("the downloaded file %s: %v %q", done.Path, err, saved.String())
	}

	// Both toolsets in one turn, on the browser endpoint's sibling: the
	// computer's screenshot, the browser's page text, the computer's key.
	mixed := `[{"type":"tool_use","id":"m1","name":"screenshot","toolset_name":"computer","input":{}},` +
		use("m2", "get_page_text", `{}`) + `,{"type":"tool_use","id":"m3","name":"key","toolset_name":"computer","input":{"text":"Escape"}}]`
	var out struct {
		Content []struct {
			ToolUseID   string `json:"tool_use_id"`
			ToolsetName string `json:"toolset_name"`
			IsError     bool   `json:"is_error"`
			Content     []struct{ Type, Text string }
		} `json:"content"`
	}
	if err := h.c.Do(ctx, http.MethodPost, "/v1/desktops/"+id+"/computer/anthropic", json.RawMessage(mixed), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Content) != 3 {
		t.Fatalf("a mixed turn answered %+v", out)
	}
	if r := out.Content[0]; r.ToolUseID != "m1" || r.IsError || len(r.Content) == 0 || r.Content[0].Type != "image" {
		t.Errorf("the computer's screenshot: %+v", r)
	}
	if r := out.Content[1]; r.ToolUseID != "m2" || r.IsError || r.ToolsetName != "browser" || !strings.Contains(r.Content[0].Text, "Sign up") {
		t.Errorf("the browser's page text: %+v", r)
	}
	if r := out.Content[2]; r.ToolUseID != "m3" || r.IsError {
		t.Errorf("the computer's key: %+v", r)
	}
}

// browserUse is a browser member's tool_use block.
func browserUse(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"toolset_name":"browser","input":%s}`, id, name, input)
}

// resultText is a tool_result's first text block.
func resultText(r browsertool.ToolResult) string {
	for _, b := range r.Content {
		if b.Type == "text" {
			return b.Text
		}
	}
	return ""
}

// resultState is a tool_result's browser_state block, or nil.
func resultState(r browsertool.ToolResult) *browsertool.BrowserState {
	for _, b := range r.Content {
		if b.Type == "browser_state" {
			return b.BrowserState
		}
	}
	return nil
}
