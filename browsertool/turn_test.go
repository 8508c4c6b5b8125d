package browsertool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/browsertool"
)

// script is an executor that answers from a table, for the turn rules
// alone: a pure unit test.
type script struct {
	ran     []string
	answers map[string]browsertool.Outcome
	fail    map[string]error
}

func (s *script) Run(_ context.Context, c browsertool.Call) (browsertool.Outcome, error) {
	s.ran = append(s.ran, c.Member)
	if err := s.fail[c.Member]; err != nil {
		return browsertool.Outcome{}, err
	}
	return s.answers[c.Member], nil
}

var docsTab = browsertool.Tab{TabID: "tab-1", Title: "Documentation", URL: "https://example.com/docs", Active: true}

// The docs' first example, a batch of two, replayed verbatim: the answers
// have the shapes the docs show (a text block and a browser_state after
// navigate; the tree as text after read_page), toolset_name echoed.
func TestDocsExampleTurn(t *testing.T) {
	msg := `{"id":"msg_01HCDu4XSTLzTAcodEQ58vDo","type":"message","role":"assistant","model":"claude-opus-5-5",
 "content":[{"type":"text","text":"I'll open the documentation and read the page to find the getting-started instructions."},
  {"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"navigate","toolset_name":"browser","input":{"url":"https://example.com/docs"}},
  {"type":"tool_use","id":"toolu_01UvHU5cDyTZ2vXKf5wCkPqR","name":"read_page","toolset_name":"browser","input":{"filter":"interactive"}}],
 "stop_reason":"tool_use","stop_sequence":null}`
	uses, others, err := browsertool.DecodeTurn([]byte(msg))
	if err != nil || others != 0 || len(uses) != 2 {
		t.Fatalf("DecodeTurn: %d uses, %d others, %v", len(uses), others, err)
	}
	tree := "link \"Documentation\" [ref_1]\nlink \"Getting started\" [ref_2]\ntextbox \"Search docs\" [ref_3]\nbutton \"Search\" [ref_4]\nlink \"Pricing\" [ref_5]"
	exec := &script{answers: map[string]browsertool.Outcome{
		"navigate":  {State: &browsertool.BrowserState{Tabs: []browsertool.Tab{docsTab}}},
		"read_page": {Text: tree},
	}}
	results, failed := browsertool.RunTurn(context.Background(), uses, browsertool.DefaultToolset(), exec)
	if failed != -1 {
		t.Fatalf("failed at %d: %+v", failed, results)
	}
	got, _ := json.Marshal(results)
	want := `[{"type":"tool_result","tool_use_id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","toolset_name":"browser","content":[` +
		`{"type":"text","text":"Navigated to https://example.com/docs"},` +
		`{"type":"browser_state","tabs":[{"tab_id":"tab-1","title":"Documentation","url":"https://example.com/docs","active":true}]}]},` +
		`{"type":"tool_result","tool_use_id":"toolu_01UvHU5cDyTZ2vXKf5wCkPqR","toolset_name":"browser","content":[` +
		`{"type":"text","text":` + quote(tree) + `}]}]`
	if string(got) != want {
		t.Errorf("results:\n got %s\nwant %s", got, want)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The docs' batch: a click on a stale ref fails, and the type and key
// after it are answered "Not executed", unrun; the computer toolset's
// call in the same turn is left to the caller.
func TestTurnStopsAtTheFirstFailure(t *testing.T) {
	turn := `[
	 {"type":"tool_use","id":"a","name":"left_click","toolset_name":"browser","input":{"target":{"type":"ref","ref":"ref_3"}}},
	 {"type":"tool_use","id":"c","name":"screenshot","input":{}},
	 {"type":"tool_use","id":"b","name":"type","toolset_name":"browser","input":{"text":"install"}},
	 {"type":"tool_use","id":"d","name":"key","toolset_name":"browser","input":{"text":"Enter"}}]`
	uses, others, err := browsertool.DecodeTurn([]byte(turn))
	if err != nil || others != 1 || len(uses) != 3 {
		t.Fatalf("DecodeTurn: %d uses, %d others, %v", len(uses), others, err)
	}
	stale := errors.New("ref_3 is stale or not found on the current page. Re-read the page to get fresh references.")
	exec := &script{fail: map[string]error{"left_click": stale}}
	results, failed := browsertool.RunTurn(context.Background(), uses, browsertool.DefaultToolset(), exec)
	if failed != 0 || len(exec.ran) != 1 {
		t.Fatalf("failed %d, ran %v", failed, exec.ran)
	}
	want := []string{"Error: " + stale.Error(), browsertool.NotExecuted, browsertool.NotExecuted}
	for i, r := range results {
		if !r.IsError || r.ToolsetName != "browser" || r.ToolUseID != uses[i].ID || len(r.Content) != 1 || r.Content[0].Text != want[i] {
			t.Errorf("result %d: %+v, want is_error %q", i, r, want[i])
		}
		if strings.Contains(mustJSON(t, r), "browser_state") {
			t.Errorf("result %d: an error result carries browser_state", i)
		}
	}
	got := mustJSON(t, results[1])
	if want := `{"type":"tool_result","tool_use_id":"b","toolset_name":"browser","is_error":true,"content":[{"type":"text","text":"Not executed: an earlier action in this turn failed."}]}`; got != want {
		t.Errorf("not executed:\n got %s\nwant %s", got, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Bad input and a disabled member fail the call with a clear text, and
// stop the turn; a successful pure action answers the SDK's acknowledgment.
func TestTurnRefusals(t *testing.T) {
	run := func(name, input string, toolset browsertool.Toolset) browsertool.ToolResult {
		t.Helper()
		uses := []browsertool.ToolUse{{ID: "x", Name: name, ToolsetName: "browser", Input: json.RawMessage(input)}}
		res, _ := browsertool.RunTurn(context.Background(), uses, toolset, &script{})
		return res[0]
	}
	def := browsertool.DefaultToolset()
	if r := run("javascript_exec", `{"text":"1+1"}`, def); !r.IsError || !strings.Contains(r.Content[0].Text, "javascript_exec is not enabled in this environment") {
		t.Errorf("a disabled member: %+v", r)
	}
	if r := run("scroll", `{"target":{"type":"coordinate","x":1,"y":2},"scroll_direction":"up","scroll_amount":0}`, def); !r.IsError || r.Content[0].Text != "Error: invalid input for browser member 'scroll': scroll_amount: must be from 1 to 10, got 0" {
		t.Errorf("bad input: %+v", r)
	}
	if r := run("navigate", `{"url":"file:///etc/passwd"}`, def); !r.IsError || !strings.HasPrefix(r.Content[0].Text, "Error: Navigation refused. Only http and https URLs are allowed.") {
		t.Errorf("a refused scheme: %+v", r)
	}
	if r := run("scroll", `{"target":{"type":"coordinate","x":1,"y":2},"scroll_direction":"up"}`, def); r.IsError || r.Content[0].Text != "Scrolled up." {
		t.Errorf("a scroll: %+v", r)
	}
	if r := run("get_page_text", `{}`, def); r.IsError || r.Content[0].Text != "(empty)" {
		t.Errorf("an empty read: %+v", r)
	}
}

// A tab member's result is exactly one browser_state block; new_tab's must
// name its tab with one tab_opened and make it the only active tab; an
// image member must return an image; a state that breaks the API's rules
// never reaches a result.
func TestResultRules(t *testing.T) {
	c := browsertool.Call{Member: "new_tab"}
	three := &browsertool.BrowserState{
		Tabs:         []browsertool.Tab{{TabID: "tab-1", Title: "Docs", URL: "https://example.com/docs"}, {TabID: "tab-3", URL: "about:blank", Active: true}},
		StateChanges: []browsertool.StateChange{{Type: "tab_opened", TabID: "tab-3"}},
	}
	r, err := browsertool.NewResult("n", c, browsertool.Outcome{Text: "ignored", State: three})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, r.Content), `[{"type":"browser_state","tabs":[{"tab_id":"tab-1","title":"Docs","url":"https://example.com/docs"},{"tab_id":"tab-3","title":"","url":"about:blank","active":true}],"state_changes":[{"type":"tab_opened","tab_id":"tab-3"}]}]`; got != want {
		t.Errorf("new_tab:\n got %s\nwant %s", got, want)
	}
	inactive := *three
	inactive.Tabs = []browsertool.Tab{{TabID: "tab-1", Active: true}, {TabID: "tab-3"}}
	if _, err := browsertool.NewResult("n", c, browsertool.Outcome{State: &inactive}); err == nil || !strings.Contains(err.Error(), "only active tab") {
		t.Errorf("new_tab whose tab is not active: %v", err)
	}
	if _, err := browsertool.NewResult("l", browsertool.Call{Member: "list_tabs"}, browsertool.Outcome{}); err == nil {
		t.Error("list_tabs without a state answered")
	}
	if _, err := browsertool.NewResult("s", browsertool.Call{Member: "screenshot"}, browsertool.Outcome{}); err == nil {
		t.Error("a screenshot without an image answered")
	}
	img := &browsertool.ImageSource{Type: "base64", MediaType: "image/png", Data: "iVBORw0KGgo="}
	r, err = browsertool.NewResult("s", browsertool.Call{Member: "screenshot"}, browsertool.Outcome{Image: img})
	if err != nil || len(r.Content) != 1 || r.Content[0].Type != "image" {
		t.Errorf("screenshot: %+v, %v", r, err)
	}
}

// browser_state's limits and rules, each broken once.
func TestBrowserStateRules(t *testing.T) {
	size := int64(-1)
	tab := browsertool.Tab{TabID: "tab-1", Active: true}
	cases := map[string]browsertool.BrowserState{
		"active tabs":            {Tabs: []browsertool.Tab{{TabID: "a"}, {TabID: "b"}}},
		"empty":                  {Tabs: []browsertool.Tab{{TabID: "", Active: true}}},
		"listed twice":           {Tabs: []browsertool.Tab{tab, {TabID: "tab-1"}}},
		"control character":      {Tabs: []browsertool.Tab{{TabID: "t", Title: "a\u2028b", Active: true}}},
		"not in tabs":            {Tabs: []browsertool.Tab{tab}, StateChanges: []browsertool.StateChange{{Type: "tab_opened", TabID: "tab-2"}}},
		"a second change":        {Tabs: []browsertool.Tab{tab}, StateChanges: []browsertool.StateChange{{Type: "download_started", DownloadID: "d", URL: "u"}, {Type: "download_completed", DownloadID: "d", URL: "u"}}},
		"negative":               {StateChanges: []browsertool.StateChange{{Type: "download_completed", DownloadID: "d", URL: "u", SizeBytes: &size}}},
		"only download_failed":   {StateChanges: []browsertool.StateChange{{Type: "download_started", DownloadID: "d", Error: "x"}}},
		"is not a state change":  {StateChanges: []browsertool.StateChange{{Type: "tab_closed", TabID: "tab-1"}}},
		"download_id: empty":     {StateChanges: []browsertool.StateChange{{Type: "download_failed"}}},
		"tabs, more than 100":    {Tabs: manyTabs(101)},
		"has only tab_id":        {Tabs: []browsertool.Tab{tab}, StateChanges: []browsertool.StateChange{{Type: "tab_opened", TabID: "tab-1", URL: "x"}}},
		"a download change has ": {StateChanges: []browsertool.StateChange{{Type: "download_started", DownloadID: "d", TabID: "tab-1"}}},
	}
	for want, s := range cases {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", want, err)
		}
	}
	ok := browsertool.BrowserState{Tabs: manyTabs(100), StateChanges: []browsertool.StateChange{{Type: "download_completed", DownloadID: "dl-1", URL: "https://example.com/price-list.csv", Path: "/home/user/downloads/price-list.csv"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("a valid state: %v", err)
	}
	if err := (browsertool.BrowserState{}).Validate(); err != nil {
		t.Errorf("no tabs: %v", err)
	}
}

func manyTabs(n int) []browsertool.Tab {
	tabs := make([]browsertool.Tab, n)
	for i := range tabs {
		tabs[i] = browsertool.Tab{TabID: "tab-" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	tabs[0].Active = true
	return tabs
}
