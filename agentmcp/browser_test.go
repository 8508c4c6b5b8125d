package agentmcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/agentmcp"
	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// fakeBrowser answers browser turns for desktop d-browser as hostd would,
// with canned results, after reading each body with the endpoint's own
// decoders; every other request goes to a real hostd API on the fake
// driver, whose desktop has no Chromium.
type fakeBrowser struct {
	mu      sync.Mutex
	uses    []browsertool.ToolUse
	toolset browsertool.Toolset
	api     http.Handler
}

func (f *fakeBrowser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/desktops/d-browser/browser/anthropic" {
		f.api.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	uses, _, err := browsertool.DecodeTurn(body)
	var msg struct{ Tools []json.RawMessage }
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	toolset, terr := browsertool.DecodeToolset(msg.Tools)
	if err != nil || terr != nil || len(uses) != 1 {
		http.Error(w, "a turn hostd would refuse: "+string(body), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.uses, f.toolset = append(f.uses, uses[0]), toolset
	f.mu.Unlock()
	docs := browsertool.Tab{TabID: "tab-1", Title: "Docs", URL: "http://host:3000/", Active: true}
	r0 := browsertool.ToolResult{Type: "tool_result", ToolUseID: uses[0].ID, ToolsetName: "browser"}
	switch uses[0].Name {
	case browsertool.Navigate:
		r0.Content = []browsertool.Block{{Type: "text", Text: "Navigated to http://host:3000/"},
			{Type: "browser_state", BrowserState: &browsertool.BrowserState{Tabs: []browsertool.Tab{docs}}}}
	case browsertool.Screenshot:
		r0.Content = []browsertool.Block{{Type: "image", Source: &browsertool.ImageSource{Type: "base64", MediaType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("png bytes"))}}}
	case browsertool.ListTabs:
		r0.Content = []browsertool.Block{{Type: "browser_state", BrowserState: &browsertool.BrowserState{Tabs: []browsertool.Tab{docs, {TabID: "tab-2", Title: "New", URL: "about:blank"}}}}}
	default:
		r0.IsError = true
		r0.Content = []browsertool.Block{{Type: "text", Text: "Error: ref_9 is stale or not found on the current page. Re-read the page to get fresh references."}}
	}
	w.Header().Set("X-Warmdesk-Failed-Call", map[bool]string{true: "0", false: "-1"}[r0.IsError])
	json.NewEncoder(w).Encode(api.BrowserTurnResult{Role: "user", Content: []browsertool.ToolResult{r0}})
}

// sent is the last call the fake received, its toolset, and how many.
func (f *fakeBrowser) sent() (browsertool.ToolUse, browsertool.Toolset, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.uses) == 0 {
		return browsertool.ToolUse{}, f.toolset, 0
	}
	return f.uses[len(f.uses)-1], f.toolset, len(f.uses)
}

// The browser tool sends one member's call as a turn hostd's endpoint
// reads (the toolset's entry enabling what enable names, one tool_use of
// toolset "browser" with the input as given) and answers the result as
// MCP content: text, images, browser_state as the text the API renders;
// is_error and API errors are tool errors.
func TestBrowserTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const token = "wd_browser_tool_test"
	fake := &fakeBrowser{api: web.New(web.Config{Manager: f.Manager, Drive: svc, Token: token}).Handler()}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	srv := agentmcp.NewServer(agentmcp.Options{Client: func(*mcp.CallToolRequest) (*client.Client, error) { return client.New(hs.URL, token), nil }})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser", Arguments: args})
		if err != nil {
			t.Fatalf("browser %v: %v", args, err)
		}
		return res
	}
	texts := func(res *mcp.CallToolResult) []string {
		var out []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				out = append(out, tc.Text)
			}
		}
		return out
	}

	// The schema offers the toolset's own member names.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "browser" })
	if i < 0 {
		t.Fatal("no browser tool")
	}
	schema, _ := json.Marshal(tools.Tools[i].InputSchema)
	var props struct {
		Properties struct {
			Member struct{ Enum []string }
			Enable struct{ Items struct{ Enum []string } }
		}
	}
	if json.Unmarshal(schema, &props); !slices.Equal(props.Properties.Member.Enum, browsertool.Members()) ||
		!slices.Equal(props.Properties.Enable.Items.Enum, []string{"file_upload", "read_console", "read_network", "javascript_exec"}) {
		t.Errorf("the browser tool's schema: %s", schema)
	}

	res := call(map[string]any{"desktop_id": "d-browser", "member": "navigate", "input": map[string]any{"url": "http://host:3000/"}})
	want := []string{"Navigated to http://host:3000/", "Tab Context:\n- Executed on tab_id: tab-1\n- Available tabs:\n  • tab_id tab-1: \"Docs\" (http://host:3000/)"}
	if res.IsError || !slices.Equal(texts(res), want) {
		t.Errorf("navigate answered %q (error %v), want %q", texts(res), res.IsError, want)
	}
	if u, ts, _ := fake.sent(); u.Name != "navigate" || u.ToolsetName != "browser" || string(u.Input) != `{"url":"http://host:3000/"}` || ts.Enabled(browsertool.JavascriptExec) {
		t.Errorf("navigate sent %+v %s, javascript_exec enabled %v", u, u.Input, ts.Enabled(browsertool.JavascriptExec))
	}

	// The session keeps the desktop; enable turns on an optional member.
	res = call(map[string]any{"member": "screenshot", "enable": []string{"javascript_exec"}})
	if img, ok := res.Content[0].(*mcp.ImageContent); res.IsError || len(res.Content) != 1 || !ok || img.MIMEType != "image/png" || string(img.Data) != "png bytes" {
		t.Errorf("screenshot answered %+v", res.Content)
	}
	if u, ts, _ := fake.sent(); string(u.Input) != "{}" || !ts.Enabled(browsertool.JavascriptExec) || ts.Enabled(browsertool.ReadConsole) {
		t.Errorf("screenshot sent input %s; enabled javascript_exec %v, read_console %v", u.Input, ts.Enabled(browsertool.JavascriptExec), ts.Enabled(browsertool.ReadConsole))
	}

	res = call(map[string]any{"member": "list_tabs", "input": nil})
	if got := texts(res); res.IsError || len(got) != 1 || got[0] != "Available tabs:\n  • tab_id tab-1: \"Docs\" (http://host:3000/) (current)\n  • tab_id tab-2: \"New\" (about:blank)" {
		t.Errorf("list_tabs answered %q", got)
	}
	if u, _, _ := fake.sent(); string(u.Input) != "{}" {
		t.Errorf("list_tabs with a null input sent %s, want {}", u.Input)
	}

	// A failed call is a tool error with the executor's words.
	res = call(map[string]any{"member": "left_click", "input": map[string]any{"target": map[string]any{"type": "ref", "ref": "ref_9"}}})
	if got := texts(res); !res.IsError || len(got) != 1 || !strings.HasPrefix(got[0], "Error: ref_9 is stale") {
		t.Errorf("a stale ref answered %q, error %v", got, res.IsError)
	}

	// API errors are tool errors naming what was wrong, and a member the
	// toolset lacks is refused before anything is sent.
	res = call(map[string]any{"desktop_id": f.ID, "member": "list_tabs"})
	if got := strings.Join(texts(res), " "); !res.IsError || !strings.Contains(got, "browser list_tabs: ") || !strings.Contains(got, "browser image") || !strings.Contains(got, "(conflict)") {
		t.Errorf("a desktop without Chromium answered %q, error %v", got, res.IsError)
	}
	_, _, before := fake.sent()
	res = call(map[string]any{"desktop_id": "d-browser", "member": "fly"})
	if _, _, after := fake.sent(); !res.IsError || !strings.Contains(strings.Join(texts(res), " "), "member") || after != before {
		t.Errorf("an unknown member answered %q, error %v, %d calls sent", texts(res), res.IsError, after-before)
	}
}
