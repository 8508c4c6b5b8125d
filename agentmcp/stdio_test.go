package agentmcp_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/hostd/cli"
	"github.com/warmdesk/warmdesk/web"
)

// runAsHostd makes this test binary `hostd` when set, so the stdio test
// starts `hostd mcp` as an MCP client would: as a program.
const runAsHostd = "WARMDESK_TEST_RUN_HOSTD"

func TestMain(m *testing.M) {
	if os.Getenv(runAsHostd) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// `hostd mcp` serves the tools on stdin and stdout to the official Go
// SDK's client, which starts it as a program, against a running hostd.
func TestStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const token = "wd_stdio_test"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: token}).Handler())
	t.Cleanup(hs.Close)

	cmd := exec.Command(os.Args[0], "mcp", "--snapshot", "snap")
	cmd.Env = append(os.Environ(), runAsHostd+"=1", "WARMDESK_ADDR="+hs.URL, "WARMDESK_TOKEN="+token)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "warmdesk-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 8 {
		t.Fatalf("tools: %v, %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_desktop"})
	if err != nil || res.IsError {
		t.Fatalf("create_desktop: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "computer", Arguments: map[string]any{"action": "screenshot"}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("screenshot: %v %+v", err, res)
	}
	if img, ok := res.Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) == 0 {
		t.Fatalf("screenshot content %T", res.Content[0])
	}
	if len(f.Manager.List()) != 2 {
		t.Errorf("%d desktops, want the fixture's and the created one", len(f.Manager.List()))
	}
	// reset_desktop resets the session's desktop in place: same id.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "reset_desktop"})
	if err != nil || res.IsError {
		t.Fatalf("reset_desktop: %v %+v", err, res)
	}
	var reset int
	for _, d := range f.Manager.List() {
		if d.ID != f.ID && d.Resets == 1 {
			reset++
		}
	}
	if n := len(f.Manager.List()); n != 2 || reset != 1 {
		t.Errorf("after reset_desktop: %d desktops, %d of them reset once; want the same two, the created one reset", n, reset)
	}
}
