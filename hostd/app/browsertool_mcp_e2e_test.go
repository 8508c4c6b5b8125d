package app_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browserOverMCP: the official Go SDK's client on the hostd's /mcp drives
// the browser desktop's Chromium by element refs with the browser tool
// (navigate, read_page, a click by ref, the page's text changed by it),
// browser_state coming back as the API's text. It shares
// TestBrowserToolsetEndToEnd's host and desktop.
func browserOverMCP(ctx context.Context, t *testing.T, h *host, id, url string) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-test", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.srv.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: mcpToken(h.a.Token)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	browser := func(member string, input map[string]any) string {
		t.Helper()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "browser", Arguments: map[string]any{"desktop_id": id, "member": member, "input": input}})
		if err != nil {
			t.Fatalf("browser %s: %v", member, err)
		}
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		text := strings.Join(texts, "\n\n")
		t.Logf("browser %s in %s:\n%s", member, time.Since(start).Round(time.Millisecond), text)
		if res.IsError {
			t.Fatalf("browser %s: a tool error: %s", member, text)
		}
		return text
	}

	if got, want := browser("navigate", map[string]any{"url": url}), `"toolset form" (`+url+`)`; !strings.Contains(got, "Tab Context:\n- Executed on tab_id: tab-") || !strings.Contains(got, want) {
		t.Errorf("navigate answered %q, want the Tab Context footer listing %s", got, want)
	}
	tree := browser("read_page", map[string]any{"filter": "interactive"})
	m := regexp.MustCompile(`button "Send"[^\n]*\[(ref_[0-9]+)\]`).FindStringSubmatch(tree)
	if m == nil {
		t.Fatalf("no button \"Send\" with a ref in read_page's answer:\n%s", tree)
	}
	if got := browser("left_click", map[string]any{"target": map[string]any{"type": "ref", "ref": m[1]}}); !strings.HasPrefix(got, "Clicked") {
		t.Errorf("left_click answered %q", got)
	}
	if got := browser("get_page_text", nil); !strings.Contains(got, "Thanks") {
		t.Errorf("get_page_text after the click: %q, want the page's answer to it", got)
	}
}

// mcpToken sets hostd's token on every request of the MCP client.
type mcpToken string

func (tok mcpToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}
