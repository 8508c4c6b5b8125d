package web

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// Actions drives desktops' input, shell, files and clipboard; hostd/app
// provides it. The routes that use it are registered by actionRoutes.
type Actions interface {
	// Runner returns the desktop's input runner, made on first use. Its
	// device refuses every frame but releases unless the desktop is
	// running and an agent holds control, so a person taking over stops a
	// batch at its next frame.
	Runner(id string) (*input.Runner, error)
	// ScreenSize is the desktop's native screen size.
	ScreenSize(id string) (width, height int, err error)
	// LocatePointer asks the guest where the pointer is and tells the
	// runner, for a cursor_position before any pointer action.
	LocatePointer(ctx context.Context, id string) error

	// Exec runs a program in the guest and waits for it.
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)
	// ExecStream runs a program and calls out with its output as it comes
	// (stream is "stdout" or "stderr"); the result's Stdout and Stderr
	// are empty.
	ExecStream(ctx context.Context, id string, req ExecRequest, out func(stream string, data []byte)) (ExecResult, error)
	// ReadFile opens a guest file for reading.
	ReadFile(ctx context.Context, id, path string) (GuestFile, error)
	// WriteFile replaces (or creates) a guest file with r's bytes, all or
	// nothing.
	WriteFile(ctx context.Context, id, path string, r io.Reader) (int64, error)
	// Clipboard reads an X selection ("clipboard" or "primary") as text.
	Clipboard(ctx context.Context, id, selection string) (string, error)
	// SetClipboard sets an X selection to text.
	SetClipboard(ctx context.Context, id, selection, text string) error
}

// ExecRequest is a program to run in a guest.
type ExecRequest struct {
	Path string
	Args []string
	Env  map[string]string
	// Cwd is the working directory, absolute; empty means the agent's.
	Cwd   string
	Stdin []byte
	// Timeout bounds the program; it is killed in the guest then.
	Timeout time.Duration
	// MaxOutput bounds stdout and stderr each.
	MaxOutput int
}

// ExecResult is how a guest program ended.
type ExecResult struct {
	desktop.ExecResult
	// TimedOut says the program ran out of its Timeout and was killed.
	TimedOut bool
}

// GuestFile is a guest file open for reading.
type GuestFile interface {
	io.ReadCloser
	// Size is the file's size when it was opened, or -1 when the guest
	// cannot tell (pipes, /proc files).
	Size() int64
}

// actionRoutes registers the routes that drive a desktop, and the control
// handover and per-desktop token routes.
func (s *Server) actionRoutes(g *gin.RouterGroup) {
	g.POST("/desktops/:id/control", s.setControl)
	g.POST("/desktops/:id/tokens", s.issueToken)
	g.POST("/desktops/:id/actions", s.postActions)
	g.POST("/desktops/:id/computer/anthropic", s.postAnthropic)
	g.POST("/desktops/:id/computer/openai", s.postOpenAI)
	g.GET("/desktops/:id/control", s.controlSocket)
	g.POST("/desktops/:id/exec", s.postExec)
	g.GET("/desktops/:id/files", s.getFile)
	g.PUT("/desktops/:id/files", s.putFile)
	g.GET("/desktops/:id/clipboard", s.getClipboard)
	g.PUT("/desktops/:id/clipboard", s.putClipboard)
}

// actions returns the configured Actions, or answers 503 when hostd runs
// without them.
func (s *Server) actions(c *gin.Context) (Actions, bool) {
	if s.cfg.Actions == nil {
		abort(c, http.StatusServiceUnavailable, "unavailable", "this hostd has no action API wired", "")
		return nil, false
	}
	return s.cfg.Actions, true
}

// mayDrive refuses tokens that may only watch.
func mayDrive(c *gin.Context) bool {
	if !mayControl(c) {
		abort(c, http.StatusForbidden, "forbidden", "this token may only watch: ask for a control token", "")
		return false
	}
	return true
}
