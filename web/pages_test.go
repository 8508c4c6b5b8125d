package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/web"
)

// pagesServer serves the pages with noVNC looked for in webDir only.
func pagesServer(t *testing.T, webDir string) *httptest.Server {
	t.Helper()
	t.Setenv(web.WebDirEnv, webDir)
	hs := httptest.NewServer(web.New(web.Config{Token: "t"}).Handler())
	t.Cleanup(hs.Close)
	return hs
}

func fetch(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func TestPagesNeedNoTokenAndKeepToThemselves(t *testing.T) {
	hs := pagesServer(t, t.TempDir())
	for path, script := range map[string]string{"/": "/static/js/dashboard.js", "/desktops/d-123": "/static/js/viewer.js"} {
		res, body := fetch(t, hs.URL+path)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if !strings.Contains(body, `src="`+script+`"`) {
			t.Errorf("GET %s does not load %s", path, script)
		}
		for h, want := range map[string]string{
			"Content-Security-Policy": "script-src 'self'",
			"Referrer-Policy":         "no-referrer",
			"Cache-Control":           "no-store",
			"X-Frame-Options":         "DENY",
		} {
			if got := res.Header.Get(h); !strings.Contains(got, want) {
				t.Errorf("GET %s: %s %q, want it to contain %q", path, h, got, want)
			}
		}
	}
}

// The pages' content security policy forbids inline scripts and handlers:
// anything inline would silently not run.
func TestPagesHaveNoInlineScript(t *testing.T) {
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
	handler := regexp.MustCompile(`\son[a-z]+\s*=`)
	style := regexp.MustCompile(`<style|\sstyle\s*=`)
	for _, name := range []string{"dashboard.html", "viewer.html"} {
		b, err := os.ReadFile(filepath.Join("static", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{inlineScript, handler, style} {
			if m := re.Find(b); m != nil {
				t.Errorf("%s has inline code the policy blocks: %q", name, m)
			}
		}
	}
}

// Every file a page or script refers to is served: a typo in an import
// would otherwise only show in a browser.
func TestPageReferencesResolve(t *testing.T) {
	hs := pagesServer(t, t.TempDir())
	ref := regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"`)
	imp := regexp.MustCompile(`(?:from|import)\s+'(\./[^']+)'`)
	seen := map[string]bool{}
	var check func(url string)
	check = func(url string) {
		if seen[url] {
			return
		}
		seen[url] = true
		res, body := fetch(t, hs.URL+url)
		if res.StatusCode != 200 {
			t.Errorf("GET %s: %d", url, res.StatusCode)
			return
		}
		if strings.HasSuffix(url, ".js") {
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("GET %s: Content-Type %q: browsers refuse modules without a JavaScript type", url, ct)
			}
			for _, m := range imp.FindAllStringSubmatch(body, -1) {
				check(filepath.Join(filepath.Dir(url), m[1]))
			}
		}
	}
	for _, page := range []string{"/", "/desktops/d-1"} {
		_, body := fetch(t, hs.URL+page)
		for _, m := range ref.FindAllStringSubmatch(body, -1) {
			check(m[1])
		}
	}
	if len(seen) < 6 {
		t.Errorf("only %d files referenced: %v", len(seen), seen)
	}
}

func TestStaticFilesRevalidate(t *testing.T) {
	hs := pagesServer(t, t.TempDir())
	res, _ := fetch(t, hs.URL+"/static/js/viewer.js")
	etag := res.Header.Get("ETag")
	if res.StatusCode != 200 || etag == "" {
		t.Fatalf("GET viewer.js: %d, ETag %q", res.StatusCode, etag)
	}
	if res, _ := fetch(t, hs.URL+"/static/js/viewer.js", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match: %d, want 304", res.StatusCode)
	}
	if res, _ := fetch(t, hs.URL+"/static/js/nothing.js"); res.StatusCode != 404 {
		t.Errorf("GET a missing file: %d", res.StatusCode)
	}
}

func TestNoVNCMissingNamesTheCommand(t *testing.T) {
	hs := pagesServer(t, t.TempDir())
	res, body := fetch(t, hs.URL+"/static/vendor/novnc/core/rfb.js")
	if res.StatusCode != 404 || !strings.Contains(body, "./scripts/setup") {
		t.Errorf("without noVNC: %d %q", res.StatusCode, body)
	}
	// The viewer says the same when its import fails.
	js, err := os.ReadFile(filepath.Join("static", "js", "viewer.js"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), "noVNC is not installed on this host: run ./scripts/setup") {
		t.Error("viewer.js does not name ./scripts/setup when noVNC is missing")
	}
}

func TestNoVNCServedFromWebDir(t *testing.T) {
	dir := t.TempDir()
	core := filepath.Join(dir, "static", "vendor", "novnc", "core")
	if err := os.MkdirAll(core, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(core, "rfb.js"), []byte("export default class RFB {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("not for the web"), 0o644); err != nil {
		t.Fatal(err)
	}
	hs := pagesServer(t, dir)
	res, body := fetch(t, hs.URL+"/static/vendor/novnc/core/rfb.js")
	if res.StatusCode != 200 || !strings.Contains(body, "class RFB") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("rfb.js: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	for _, path := range []string{
		"/static/vendor/novnc/core/",              // no listings
		"/static/vendor/novnc/",                   // no listings
		"/static/vendor/novnc/../../../secret",    // cleaned to /static/secret
		"/static/vendor/novnc/%2e%2e/%2e%2e/x",    // escaped dots
		"/static/vendor/novnc/core/%2e%2e/../../", // both
	} {
		if res, body := fetch(t, hs.URL+path); res.StatusCode == 200 || strings.Contains(body, "not for the web") {
			t.Errorf("GET %s: %d %q", path, res.StatusCode, body)
		}
	}
}
