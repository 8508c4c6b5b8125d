package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// bearerTransport adds a token to every request, as an MCP client's
// configuration does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-test", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The MCP server at /mcp, through the official Go SDK's client over
// streamable HTTP: its tools (golden), a session bound to the desktop it
// created, screenshots as image content, clicks, exec, files, and errors
// as tool errors the model can read.
func TestMCPOverStreamableHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		if c.Path == "/bin/sh" && len(c.Args) == 2 && c.Args[1] == "echo hi" {
			return desktoptest.GuestResult{Stdout: []byte("hi\n")}, nil
		}
		return desktoptest.GuestResult{ExitCode: 127, Stderr: []byte("not found")}, nil
	}
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const daemon = "wd_mcp_test"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: daemon}).Handler())
	t.Cleanup(hs.Close)

	if _, err := mcpSession(t, hs.URL+"/mcp", "wd_wrong"); err == nil {
		t.Fatal("a wrong token opened an MCP session")
	}
	cs, err := mcpSession(t, hs.URL+"/mcp?snapshot=snap&display=640x400", daemon)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	golden, _ := json.MarshalIndent(tools.Tools, "", "  ")
	path := filepath.Join("testdata", "mcp_tools.golden")
	if *updateGolden {
		os.WriteFile(path, append(golden, '\n'), 0o644)
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(append(golden, '\n'), want) {
		t.Errorf("the tools are not testdata/mcp_tools.golden (go test -run MCP -update rewrites it): %v\n%s", err, golden)
	}

	// Before any desktop is bound, a call names what to do.
	if res := callTool(t, cs, "computer", map[string]any{"action": "screenshot"}); !res.IsError || !strings.Contains(text(res), "create_desktop") {
		t.Errorf("computer with no desktop: %+v %q", res.IsError, text(res))
	}
	res := callTool(t, cs, "create_desktop", nil)
	var created struct{ ID, Snapshot string }
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &created)
	if res.IsError || created.ID == "" || created.Snapshot != "snap" {
		t.Fatalf("create_desktop: %s %s", text(res), b)
	}
	res = callTool(t, cs, "list_desktops", nil)
	if !strings.Contains(text(res), created.ID) || !strings.Contains(text(res), f.ID) {
		t.Errorf("list_desktops: %s", text(res))
	}

	// The session's desktop is the one it created.
	res = callTool(t, cs, "computer", map[string]any{"action": "screenshot"})
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("screenshot: %s", text(res))
	}
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("screenshot content %T", res.Content[0])
	}
	pic, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil || pic.Bounds().Dx() != 640 || pic.Bounds().Dy() != 400 {
		t.Fatalf("screenshot: %v, %v: want 640x400 (?display)", err, pic.Bounds())
	}
	if res := callTool(t, cs, "computer", map[string]any{"action": "left_click", "coordinate": []int{100, 50}}); res.IsError {
		t.Errorf("left_click: %s", text(res))
	}
	if res := callTool(t, cs, "computer", map[string]any{"action": "left_click", "coordinate": []int{900, 50}}); !res.IsError || !strings.Contains(text(res), "coordinate") {
		t.Errorf("a click off the 640x400 display: %v %s", res.IsError, text(res))
	}
	if res := callTool(t, cs, "exec", map[string]any{"command": "echo hi", "desktop_id": f.ID}); res.IsError || !strings.Contains(text(res), `"stdout":"hi\n"`) {
		t.Errorf("exec: %s", text(res))
	}
	// Naming a desktop binds it: the file calls go to f.ID.
	if res := callTool(t, cs, "write_file", map[string]any{"path": "/root/note.txt", "content": "from mcp"}); res.IsError {
		t.Fatalf("write_file: %s", text(res))
	}
	if got, _ := f.Guest.File("/root/note.txt"); string(got) != "from mcp" {
		t.Errorf("the file holds %q", got)
	}
	if res := callTool(t, cs, "read_file", map[string]any{"path": "/root/note.txt"}); !strings.Contains(text(res), `"text":"from mcp"`) {
		t.Errorf("read_file: %s", text(res))
	}
	if res := callTool(t, cs, "read_file", map[string]any{"path": "/root/none"}); !res.IsError {
		t.Errorf("read_file of a missing file: %s", text(res))
	}
	// Windows, in the session's 640x400 space.
	if res := callTool(t, cs, "windows", map[string]any{"action": "list"}); res.IsError || !strings.Contains(text(res), `"id":"0x01c0000d"`) || !strings.Contains(text(res), `"width":323`) {
		t.Errorf("windows list: %s", text(res))
	}
	if res := callTool(t, cs, "windows", map[string]any{"action": "move", "window_id": "0x01c0000d", "x": 50, "y": 40}); res.IsError || !strings.Contains(text(res), `"x":50,"y":40`) {
		t.Errorf("windows move: %s", text(res))
	}
	if res := callTool(t, cs, "accessibility", nil); !res.IsError || !strings.Contains(text(res), "no accessibility bus") {
		t.Errorf("accessibility on an image without the bus: %v %s", res.IsError, text(res))
	}
	if res := callTool(t, cs, "windows", map[string]any{"action": "close"}); !res.IsError || !strings.Contains(text(res), "window_id") {
		t.Errorf("windows close with no window: %v %s", res.IsError, text(res))
	}
	if res := callTool(t, cs, "windows", map[string]any{"action": "maximize", "window_id": "0x01c0000d"}); !res.IsError || !strings.Contains(text(res), "list, focus, close, move or resize") {
		t.Errorf("windows maximize: %v %s", res.IsError, text(res))
	}
	if res := callTool(t, cs, "delete_desktop", map[string]any{"desktop_id": created.ID}); res.IsError {
		t.Fatalf("delete_desktop: %s", text(res))
	}
	if _, err := f.Manager.Get(created.ID); err == nil {
		t.Error("the desktop is still there after delete_desktop")
	}
}

// read_file stops at its limit without holding the rest: the in-process
// call streams, and a reader that stops ends it.
func TestMCPReadFileLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const daemon = "wd_mcp_limit"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: daemon}).Handler())
	t.Cleanup(hs.Close)
	f.Guest.SetFile("/root/big", bytes.Repeat([]byte("x"), 300<<10))
	f.Guest.SetFile("/root/small", []byte("ok"))
	cs, err := mcpSession(t, hs.URL+"/mcp", daemon)
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "read_file", map[string]any{"desktop_id": f.ID, "path": "/root/big"})
	if !res.IsError || !strings.Contains(text(res), "more than the 262144 bytes") {
		t.Errorf("a 300 KiB read: %v %.200s", res.IsError, text(res))
	}
	if res := callTool(t, cs, "read_file", map[string]any{"path": "/root/small"}); res.IsError || !strings.Contains(text(res), `"text":"ok"`) {
		t.Errorf("a small read after: %s", text(res))
	}
}

// A desktop's token opens an MCP session fixed to that desktop, offered
// the tools its role reaches; the host's tools are not there, another
// desktop is refused, and a revoked token ends the session.
func TestMCPWithADesktopsToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		return desktoptest.GuestResult{Stdout: []byte("hi\n")}, nil
	}
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const daemon = "wd_mcp_desktop_token"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: daemon}).Handler())
	t.Cleanup(hs.Close)
	issue := func(role string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", hs.URL+"/v1/desktops/"+f.ID+"/tokens", strings.NewReader(`{"role": "`+role+`"}`))
		req.Header.Set("Authorization", "Bearer "+daemon)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Token string }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("issue a %s token: %d %v", role, resp.StatusCode, err)
		}
		return out.Token
	}
	toolNames := func(cs *mcp.ClientSession) string {
		t.Helper()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		return strings.Join(names, " ")
	}

	if _, err := mcpSession(t, hs.URL+"/mcp", issue("view")); err == nil {
		t.Error("a view token opened an MCP session: its tools would all drive")
	}
	for role, want := range map[string]string{
		"control": "accessibility browser computer reset_desktop windows",
		"shell":   "accessibility browser computer exec read_file reset_desktop windows write_file",
	} {
		cs, err := mcpSession(t, hs.URL+"/mcp", issue(role))
		if err != nil {
			t.Fatalf("a %s token: %v", role, err)
		}
		if got := toolNames(cs); got != want {
			t.Errorf("a %s token's tools: %q, want %q", role, got, want)
		}
		// Bound from the start: no desktop_id needed.
		res := callTool(t, cs, "computer", map[string]any{"action": "screenshot"})
		if _, ok := firstImage(res); res.IsError || !ok {
			t.Errorf("a %s token's screenshot: %s", role, text(res))
		}
		if res := callTool(t, cs, "computer", map[string]any{"action": "left_click", "coordinate": []int{10, 10}}); res.IsError {
			t.Errorf("a %s token's click: %s", role, text(res))
		}
		res = callTool(t, cs, "computer", map[string]any{"action": "screenshot", "desktop_id": "d-another"})
		if !res.IsError || !strings.Contains(text(res), "reaches only desktop "+f.ID) {
			t.Errorf("a %s token naming another desktop: %v %s", role, res.IsError, text(res))
		}
		if role == "shell" {
			if res := callTool(t, cs, "exec", map[string]any{"command": "echo hi"}); res.IsError || !strings.Contains(text(res), `"stdout":"hi\n"`) {
				t.Errorf("a shell token's exec: %s", text(res))
			}
		}
	}

	// Revoked, the token no longer reaches /mcp, not even a session it
	// opened before.
	cs, err := mcpSession(t, hs.URL+"/mcp", issue("control"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("DELETE", hs.URL+"/v1/desktops/"+f.ID+"/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+daemon)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
	defer callCancel()
	if res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "computer", Arguments: map[string]any{"action": "screenshot"}}); err == nil && !res.IsError {
		t.Error("a revoked token's session still takes screenshots")
	}
}

func firstImage(res *mcp.CallToolResult) (*mcp.ImageContent, bool) {
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok {
			return img, true
		}
	}
	return nil, false
}
