package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/hostd/config"
)

func cmdServe(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "serve")
	cfg := config.DefaultServe()
	cfg.Register(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	a, err := app.Open(ctx, cfg, e.log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx, func(addr string) {
		url := "http://" + addr + "/"
		fmt.Fprintf(e.stderr, "hostd serving on %s (driver %s, %s)\n", url, a.Driver.Name(), a.Driver.Shape().Accel)
		if a.NewToken {
			// Printed once, at the start that made it; it stays in the
			// state directory (mode 0600) for the CLI.
			fmt.Fprintf(e.stderr, "API token (made now, kept in %s): %s\n", cfg.TokenFile(), a.Token)
		} else {
			fmt.Fprintf(e.stderr, "API token: in %s\n", cfg.TokenFile())
		}
		fmt.Fprintf(e.stderr, "open %s in a browser and log in with the token\n", url)
	})
}

// daemonClient returns a client for the hostd whose state is in paths, from
// the address and token files it writes.
func daemonClient(paths config.Paths) (*client.Client, error) {
	tok := os.Getenv("WARMDESK_TOKEN")
	if tok == "" {
		b, err := os.ReadFile(paths.TokenFile())
		if err != nil {
			return nil, fmt.Errorf("no API token: set WARMDESK_TOKEN or run as the user that runs hostd (%w)", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	addr := os.Getenv("WARMDESK_ADDR")
	if addr == "" {
		b, err := os.ReadFile(paths.AddressFile())
		if err != nil {
			return nil, fmt.Errorf("hostd is not running (no %s): start it with `hostd serve`, or set WARMDESK_ADDR", paths.AddressFile())
		}
		addr = strings.TrimSpace(string(b))
	}
	return client.New(addr, tok), nil
}

func isUnreachable(err error) bool { return client.IsUnreachable(err) }
