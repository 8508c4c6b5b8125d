// Package cli is hostd's command line: one function per subcommand, each
// with its own flags, returning an exit code.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/warmdesk/warmdesk/hostd/bench"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// env is what every command gets: its output streams and a logger.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

// usageError is an error in how a command was called; its exit code is 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func commands() map[string]command {
	return map[string]command{
		"serve":    {"run the daemon: desktops over HTTP and WebSocket", cmdServe},
		"image":    {"build, list and remove guest images (image build|list|rm|prune)", cmdImage},
		"snapshot": {"bake, list, verify and remove golden snapshots (snapshot bake|list|verify|rm)", cmdSnapshot},
		"desktop":  {"manage desktops on a running daemon (desktop create|list|get|rm|pause|resume|hibernate|wake|reset|record|fork|snapshot|network)", cmdDesktop},
		"volume":   {"manage workspaces that outlive desktops (volume create|list|rm|snapshot|attach|detach|export|import)", cmdVolume},
		"token":    {"rotate the daemon's API token (token rotate)", cmdToken},
		"cluster":  {"make the certificates of a fleet of hosts and change its etcd members (cluster certs, cluster member)", cmdCluster},
		"status":   {"what the running daemon admits now: desktops, memory, CPU pressure and its admission queue", cmdStatus},
		"fleet":    {"the fleet this host belongs to: its status, draining a host of new desktops, and moving running desktops between hosts (fleet status|drain|undrain|move)", cmdFleet},
		"mcp":      {"serve the MCP tools (desktops, computer, exec, files) on stdin and stdout, against the running daemon", cmdMCP},
		"bench":    {"measure this host, suite by suite (" + strings.Join(bench.Suites, ", ") + ")", cmdBench},
		"version":  {"print the version", cmdVersion},
	}
}

// Version is set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// Main runs hostd with args and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	level := slog.LevelInfo
	if os.Getenv("WARMDESK_DEBUG") != "" {
		level = slog.LevelDebug
	}
	e := &env{stdout: stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hostd: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	err := c.run(ctx, e, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "hostd %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "hostd %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: hostd COMMAND [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", n, cmds[n].summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRun hostd COMMAND -h for a command's flags.")
}

type flagSet = flag.FlagSet

// flags returns a flag set for a (sub)command whose errors come back as
// usage errors rather than exits.
func flags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("hostd "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// parse parses flags, allowing flags after positional arguments too.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// sub dispatches a command with sub-subcommands (image build, ...).
func sub(ctx context.Context, e *env, name string, args []string, subs map[string]func(context.Context, *env, []string) error) error {
	var names []string
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		return usagef("want one of: %s %s", name, strings.Join(names, "|"))
	}
	f, ok := subs[args[0]]
	if !ok {
		return usagef("unknown %s command %q: want one of %s", name, args[0], strings.Join(names, ", "))
	}
	return f(ctx, e, args[1:])
}

func cmdVersion(ctx context.Context, e *env, args []string) error {
	fmt.Fprintln(e.stdout, "hostd", Version)
	return nil
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }
