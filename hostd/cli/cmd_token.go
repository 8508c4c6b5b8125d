package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/internal/tokenfile"
)

func cmdToken(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "token", args, map[string]func(context.Context, *env, []string) error{
		"rotate": tokenRotate,
	})
}

// tokenRotate replaces the daemon's API token: through the running daemon
// (which takes the new one at once, refusing the old from the next
// request), or in the token file when no daemon runs.
func tokenRotate(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "token rotate")
	paths := config.DefaultPaths()
	paths.Register(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if _, err := os.Stat(paths.AddressFile()); err == nil {
		c, err := daemonClient(paths)
		if err != nil {
			return err
		}
		if _, err := c.RotateToken(ctx); err == nil {
			fmt.Fprintf(e.stdout, "the daemon's token was rotated; the new one is in %s\n", paths.TokenFile())
			return nil
		} else if !isUnreachable(err) {
			return fmt.Errorf("rotate through the daemon: %w", err)
		}
	}
	if _, err := tokenfile.Rotate(paths.TokenFile()); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "no daemon runs: the new token is in %s, for its next start\n", paths.TokenFile())
	return nil
}
