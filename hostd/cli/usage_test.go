package cli

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
)

// Each command's one-line summary names the subcommands it has: the
// summary is written by hand, the subcommands are the ones sub() knows.
func TestSummariesNameEverySubcommand(t *testing.T) {
	listed := regexp.MustCompile(`\((\w+) ([a-z|]+)\)$`)
	for name, c := range commands() {
		m := listed.FindStringSubmatch(c.summary)
		if m == nil {
			continue
		}
		var out bytes.Buffer
		Main(context.Background(), []string{name}, &out, &out)
		// sub() answers "want one of: NAME a|b|c" without a subcommand.
		_, known, ok := strings.Cut(out.String(), "want one of: "+name+" ")
		if !ok {
			t.Fatalf("hostd %s without a subcommand said %q", name, out.String())
		}
		want := strings.Split(strings.TrimSpace(known), "|")
		got := strings.Split(m[2], "|")
		slices.Sort(got)
		if m[1] != name || !slices.Equal(got, want) {
			t.Errorf("hostd %s's summary lists %s %v, its subcommands are %v", name, m[1], got, want)
		}
	}
}

func TestHostStatusText(t *testing.T) {
	got := hostStatus(api.Host{Desktops: 3, MaxDesktops: 32, MemoryMiB: 3072, MaxMemoryMiB: 32768,
		CPU: api.HostCPU{Pressure: 0.42, Source: "psi", WindowS: 10, Bound: 0.9, Queued: 1, Refused: 2}})
	for _, want := range []string{"desktops   3 of 32", "memory     3072 of 32768 MiB", "cpu        42% pressure over the last 10 s (psi)", "queue at 90% or more; 1 waiting, 0 admitted after waiting, 2 refused"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if got := hostStatus(api.Host{}); !strings.Contains(got, "no admission by CPU") {
		t.Errorf("without a bound:\n%s", got)
	}
}

// status and fleet status take no arguments: one given is a usage error,
// named, before any daemon is asked.
func TestDaemonCommandsRefuseArguments(t *testing.T) {
	for _, args := range [][]string{{"status", "extra"}, {"fleet", "status", "extra"}} {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "takes no arguments") {
			t.Errorf("%q: exit %d, %s", args, code, errOut.String())
		}
	}
}
