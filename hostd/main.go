// Command hostd is warmdesk's host daemon and its command line: it builds
// guest images, bakes golden snapshots, serves desktops restored from them
// over HTTP, and talks to a running daemon for a person at a terminal.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/warmdesk/warmdesk/hostd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
