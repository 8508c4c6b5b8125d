package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// The pages, their scripts and styles are compiled in, so `go build` on a
// fresh checkout serves them without Node. noVNC is not: it comes from npm
// and is served from disk (see pages_vendor.go).
//
//go:embed static/*.html static/css static/js
var staticFiles embed.FS

// pageHeaders keep what the pages hold to themselves: scripts only from this
// host (no inline scripts, so an injected string cannot run), no framing,
// and no Referer leaving the page. connect-src 'self' covers the page's own
// ws:// and wss:// origin.
var pageHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; " +
		"img-src 'self' blob: data:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
		"form-action 'self'; frame-ancestors 'none'",
	"Referrer-Policy":        "no-referrer",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
}

// pages registers the dashboard, the viewer and their static files. The
// pages themselves need no token: they hold no data, and a browser cannot
// send a header when it loads a page. Everything they show comes from the
// API with the token the person logs in with.
func (s *Server) pages(e *gin.Engine) {
	assets := newEmbedded(staticFiles)
	e.GET("/", s.page(assets, "static/dashboard.html"))
	e.GET("/desktops/:id", s.page(assets, "static/viewer.html"))
	vendor := newVendor(s.log)
	e.GET("/static/*file", func(c *gin.Context) {
		name := path.Clean("/" + c.Param("file"))
		if rest, ok := strings.CutPrefix(name, "/vendor/novnc/"); ok {
			vendor.serve(c, rest)
			return
		}
		setHeaders(c, pageHeaders)
		c.Header("Cache-Control", "no-cache")
		assets.serve(c, "static"+name)
	})
	if _, ok := vendor.dir(); !ok {
		s.log.Warn("viewer: noVNC is not installed, so the viewer cannot show desktops; run ./scripts/setup (or set WARMDESK_WEB_DIR)")
	}
}

func (s *Server) page(assets *embedded, name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		setHeaders(c, pageHeaders)
		// A page is tiny; never serving it from a cache keeps the pages and
		// their scripts (which revalidate) in step after an upgrade.
		c.Header("Cache-Control", "no-store")
		assets.serve(c, name)
	}
}

func setHeaders(c *gin.Context, h map[string]string) {
	for k, v := range h {
		c.Header(k, v)
	}
}

// embedded serves compiled-in files with content ETags, so browsers
// revalidate them cheaply (embedded files carry no modification time).
type embedded struct {
	files map[string][]byte
	etags map[string]string
}

func newEmbedded(fsys embed.FS) *embedded {
	e := &embedded{files: map[string][]byte{}, etags: map[string]string{}}
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		e.files[p] = b
		e.etags[p] = `"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	return e
}

func (e *embedded) serve(c *gin.Context, name string) {
	b, ok := e.files[name]
	if !ok {
		c.String(http.StatusNotFound, "not found\n")
		return
	}
	c.Header("ETag", e.etags[name])
	// ServeContent answers If-None-Match and sets the type from the name.
	http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(b))
}
