package web

import (
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
)

// WebDirEnv names the directory holding static/vendor/novnc, the noVNC that
// scripts/setup (or the Dockerfile) copies from npm. When it is unset, hostd
// looks in web/ beside its executable's directory (bin/hostd in a checkout
// finds the checkout's web/), then in the current directory and each of its
// parents (./web, or . when run from web/ itself, as `go test` does).
const WebDirEnv = "WARMDESK_WEB_DIR"

// NoVNCMissing is what the viewer shows, and the vendor path answers, when
// noVNC is not installed.
const NoVNCMissing = "noVNC is not installed on this host: run ./scripts/setup (it copies @novnc/novnc from npm into web/static/vendor), or point " + WebDirEnv + " at a web directory that has static/vendor/novnc"

// novncMarker is a file every noVNC install has.
const novncMarker = "core/rfb.js"

// vendor finds and serves noVNC from disk. A found directory is kept; a
// missing one is looked for again on the next request, so running
// scripts/setup while hostd runs is enough.
type vendor struct {
	log   *slog.Logger
	mu    sync.Mutex
	found string
}

func newVendor(log *slog.Logger) *vendor { return &vendor{log: log} }

func (v *vendor) dir() (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.found != "" {
		return v.found, true
	}
	for _, web := range webDirCandidates() {
		d := filepath.Join(web, "static", "vendor", "novnc")
		if st, err := os.Stat(filepath.Join(d, novncMarker)); err == nil && st.Mode().IsRegular() {
			v.found = d
			v.log.Info("viewer: serving noVNC", "dir", d)
			return d, true
		}
	}
	return "", false
}

// webDirCandidates lists where a web directory may be, in order.
func webDirCandidates() []string {
	if d := os.Getenv(WebDirEnv); d != "" {
		// Set on purpose: look nowhere else, so a wrong value shows.
		return []string{d}
	}
	var out []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			out = append(out, filepath.Join(filepath.Dir(exe), "..", "web"), filepath.Join(filepath.Dir(exe), "web"))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			out = append(out, filepath.Join(d, "web"))
			if filepath.Base(d) == "web" {
				out = append(out, d)
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return out
}

func (v *vendor) serve(c *gin.Context, name string) {
	setHeaders(c, pageHeaders)
	dir, ok := v.dir()
	if !ok {
		c.Header("Cache-Control", "no-store")
		c.String(http.StatusNotFound, NoVNCMissing+"\n")
		return
	}
	fsys := os.DirFS(dir)
	if name == "" || !fs.ValidPath(name) || strings.HasPrefix(name, ".") {
		c.String(http.StatusNotFound, "not found\n")
		return
	}
	// Files only: no directory listings.
	if st, err := fs.Stat(fsys, name); err != nil || !st.Mode().IsRegular() {
		c.String(http.StatusNotFound, "not found\n")
		return
	}
	// noVNC changes only when setup copies a new version: revalidating
	// by modification time is enough.
	c.Header("Cache-Control", "no-cache")
	http.ServeFileFS(c.Writer, c.Request, fsys, name)
}
