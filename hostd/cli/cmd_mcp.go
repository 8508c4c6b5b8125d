package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/agentmcp"
	"github.com/warmdesk/warmdesk/client"
)

// cmdMCP serves warmdesk's MCP tools over stdin and stdout, for MCP
// clients that start their servers as programs. It talks to the running
// hostd (its address and token files, or WARMDESK_ADDR and WARMDESK_TOKEN)
// like every other client command.
func cmdMCP(ctx context.Context, e *env, args []string) error {
	var display, snapshot string
	_, c, err := connectAs(e, "mcp", args, func(fs *flagSet) {
		fs.StringVar(&display, "display", "", "WIDTHxHEIGHT screenshots come back at (the computer tool's coordinates); default the native screen")
		fs.StringVar(&snapshot, "snapshot", "minimal", "the snapshot create_desktop starts from when the model names none")
	})
	if err != nil {
		return err
	}
	opts := agentmcp.Options{DefaultSnapshot: snapshot, Client: func(*mcp.CallToolRequest) (*client.Client, error) { return c, nil }}
	if display != "" {
		w, h, ok := strings.Cut(display, "x")
		var errW, errH error
		opts.DisplayWidth, errW = strconv.Atoi(w)
		opts.DisplayHeight, errH = strconv.Atoi(h)
		if !ok || errW != nil || errH != nil || opts.DisplayWidth < 64 || opts.DisplayHeight < 64 {
			return usagef("--display %q: write WIDTHxHEIGHT, like 1280x800", display)
		}
	}
	e.log.Info("serving MCP on stdin and stdout", "hostd", c.BaseURL)
	if err := agentmcp.NewServer(opts).Run(ctx, &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{e.stdout}}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct {
	w interface{ Write([]byte) (int, error) }
}

func (n nopWriteCloser) Write(p []byte) (int, error) { return n.w.Write(p) }
func (nopWriteCloser) Close() error                  { return nil }
