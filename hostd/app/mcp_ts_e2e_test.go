package app_test

import (
	"os"
	"path/filepath"
	"testing"
)

// The MCP TypeScript SDK's own client (examples/mcp,
// @modelcontextprotocol/sdk from npm) against a whole hostd's /mcp on the
// minimal snapshot: it lists the tools, creates a desktop, clicks into its
// xterm, types text outside the US layout, reads it back with exec, takes a
// screenshot at the size it asked for, and deletes the desktop.
func TestMCPTypeScriptClient(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "minimal")
	dir, err := filepath.Abs("../../examples/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("examples/mcp has no MCP SDK (scripts/setup runs npm ci there): %v", err)
	}
	h := openHost(t, cfg)
	runNodeTests(t, dir, []string{"WARMDESK_URL=" + h.srv.URL, "WARMDESK_TOKEN=" + h.a.Token, "WARMDESK_SNAPSHOT=" + snap}, "client.mjs", 1, "mcp")
	if ds, err := h.c.Desktops(t.Context()); err != nil || len(ds) != 0 {
		t.Errorf("desktops left after the example: %v %v", ds, err)
	}
}
