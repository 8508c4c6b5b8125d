package cli

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
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
