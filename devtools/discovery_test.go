package devtools_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/devtools"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestRewriteDiscoveryGolden(t *testing.T) {
	for _, c := range []struct{ in, base, golden string }{
		{"version.json", "ws://127.0.0.1:8080/v1/desktops/d-1/cdp", "version.ws.golden"},
		{"list.json", "ws://127.0.0.1:8080/v1/desktops/d-1/cdp", "list.ws.golden"},
		{"list.json", "wss://127.0.0.5:8443/v1/cdp/wdt1.d-1.shell.1767225600.abc", "list.token.golden"},
	} {
		in, err := os.ReadFile(filepath.Join("testdata", c.in))
		if err != nil {
			t.Fatal(err)
		}
		base, _ := url.Parse(c.base)
		got, err := devtools.RewriteDiscovery(in, base)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		path := filepath.Join("testdata", c.golden)
		if *update {
			os.WriteFile(path, got, 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s under %s:\n%s\nwant:\n%s", c.in, c.base, got, want)
		}
		if bytes.Contains(got, []byte("9222")) {
			t.Errorf("%s: a URL still points at Chromium's own port:\n%s", c.in, got)
		}
	}
}

func TestRewriteDiscoveryRefusesWhatIsNotDevTools(t *testing.T) {
	base, _ := url.Parse("ws://127.0.0.1:8080/v1/desktops/d-1/cdp")
	for _, doc := range []string{
		``, `nope`, `"a string"`, `[1]`, `{"a": 1} {"b": 2}`,
		`{"webSocketDebuggerUrl": 5}`,
		`{"webSocketDebuggerUrl": "http://127.0.0.1:9222/devtools/page/1"}`,
		`{"webSocketDebuggerUrl": "ws://127.0.0.1:9222/elsewhere"}`,
	} {
		if out, err := devtools.RewriteDiscovery([]byte(doc), base); err == nil {
			t.Errorf("%q was accepted: %s", doc, out)
		}
	}
	http, _ := url.Parse("http://127.0.0.1:8080/v1/desktops/d-1/cdp")
	if _, err := devtools.RewriteDiscovery([]byte(`{}`), http); err == nil {
		t.Error("an http base was accepted")
	}
}

func FuzzRewriteDiscovery(f *testing.F) {
	for _, name := range []string{"version.json", "list.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"webSocketDebuggerUrl": "ws://x/devtools/a?b=c#d", "devtoolsFrontendUrl": 1}]`))
	base, _ := url.Parse("ws://127.0.0.1:8080/v1/desktops/d-1/cdp")
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := devtools.RewriteDiscovery(doc, base)
		if err != nil {
			return
		}
		// What comes out is JSON again, and every socket is under base.
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("rewritten document is not JSON: %v\n%s", err, out)
		}
		targets, _ := v.([]any)
		if m, ok := v.(map[string]any); ok {
			targets = []any{m}
		}
		for _, e := range targets {
			m, _ := e.(map[string]any)
			if s, ok := m["webSocketDebuggerUrl"].(string); ok && !strings.HasPrefix(s, base.String()+"/devtools/") {
				t.Fatalf("socket %q is not under %s", s, base)
			}
		}
	})
}
