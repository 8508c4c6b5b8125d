package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// Bounds of the guest endpoints.
const (
	defaultExecTimeout = 30 * time.Second
	maxExecTimeout     = 10 * time.Minute
	maxExecOutput      = 16 << 20 // what qemu-guest-agent itself keeps
	// MaxFileBytes bounds an upload or download through the guest agent,
	// which moves files in base64 chunks over a serial port.
	MaxFileBytes = 256 << 20
	// clipboardTimeout bounds a clipboard read or write.
	clipboardTimeout = 15 * time.Second
)

// guestTarget checks that a desktop runs, so its guest agent can answer:
// a paused guest's agent cannot, and a hibernated or failed one has none.
func (s *Server) guestTarget(c *gin.Context) (Actions, string, bool) {
	if !mayDrive(c) {
		return nil, "", false
	}
	acts, ok := s.actions(c)
	if !ok {
		return nil, "", false
	}
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return nil, "", false
	}
	if d.State != desktop.StateRunning {
		fail(c, &desktop.TransitionError{ID: id, From: d.State, Action: "reach the guest agent of"})
		return nil, "", false
	}
	return acts, id, true
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// execRequestOf checks an exec body; the error names the field.
func execRequestOf(r api.ExecRequest) (ExecRequest, error) {
	out := ExecRequest{Args: r.Args, Cwd: r.Cwd, Timeout: time.Duration(r.Timeout), MaxOutput: r.MaxOutput}
	switch {
	case r.Cmd != "" && r.Shell != "":
		return out, fieldError("shell", "give cmd (with args) or shell, not both")
	case r.Shell != "":
		if len(r.Args) > 0 {
			return out, fieldError("args", "args go with cmd; a shell line carries its own")
		}
		out.Path, out.Args = "/bin/sh", []string{"-c", r.Shell}
	case r.Cmd != "":
		out.Path = r.Cmd
	default:
		return out, fieldError("cmd", "required: a program (or shell: a command line)")
	}
	if strings.ContainsRune(out.Path, 0) || strings.Contains(out.Path, "=") {
		return out, fieldError("cmd", "%q is not a program name", out.Path)
	}
	for i, a := range out.Args {
		if strings.ContainsRune(a, 0) {
			return out, fieldError(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	if len(r.Env) > 0 {
		out.Env = map[string]string{}
		for k, v := range r.Env {
			if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
				return out, fieldError("env."+k, "not a valid environment variable")
			}
			out.Env[k] = v
		}
	}
	if r.Cwd != "" && (!path.IsAbs(r.Cwd) || strings.ContainsRune(r.Cwd, 0)) {
		return out, fieldError("cwd", "%q: use an absolute path", r.Cwd)
	}
	if out.Timeout == 0 {
		out.Timeout = defaultExecTimeout
	}
	if out.Timeout < 0 || out.Timeout > maxExecTimeout {
		return out, fieldError("timeout", "%s: use up to %s", out.Timeout, maxExecTimeout)
	}
	switch {
	case r.Stdin != "" && len(r.StdinBase64) > 0:
		return out, fieldError("stdin_base64", "give stdin or stdin_base64, not both")
	case r.Stdin != "":
		out.Stdin = []byte(r.Stdin)
	default:
		out.Stdin = r.StdinBase64
	}
	if out.MaxOutput < 0 || out.MaxOutput > maxExecOutput {
		return out, fieldError("max_output", "%d: use 0 (1 MiB) to %d bytes", out.MaxOutput, maxExecOutput)
	}
	if out.MaxOutput == 0 {
		out.MaxOutput = desktop.DefaultMaxOutput
	}
	return out, nil
}

// execResponse turns a result into its JSON form: text when the output is
// valid UTF-8, base64 otherwise.
func execResponse(r ExecResult) api.ExecResponse {
	out := api.ExecResponse{
		ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		DurationMs: ms(r.Duration),
	}
	out.Stdout, out.StdoutBase64 = textOrBytes(r.Stdout)
	out.Stderr, out.StderrBase64 = textOrBytes(r.Stderr)
	return out
}

func textOrBytes(b []byte) (string, []byte) {
	if utf8.Valid(b) {
		return string(b), nil
	}
	return "", b
}

func (s *Server) postExec(c *gin.Context) {
	var req api.ExecRequest
	if !mayDrive(c) || !decodeJSON(c, &req) {
		return
	}
	er, err := execRequestOf(req)
	if err != nil {
		failWith(c, err)
		return
	}
	acts, id, ok := s.guestTarget(c)
	if !ok {
		return
	}
	res, err := acts.Exec(c.Request.Context(), id, er)
	if err != nil {
		fail(c, err)
		return
	}
	s.cfg.Manager.Touch(id)
	c.JSON(http.StatusOK, execResponse(res))
}

// guestPath checks the path query parameter of the files endpoints.
func guestPath(c *gin.Context) (string, bool) {
	p := c.Query("path")
	switch {
	case p == "":
		badRequest(c, "path", "path: required, an absolute path in the guest (?path=/tmp/file)")
		return "", false
	case !path.IsAbs(p) || strings.ContainsRune(p, 0):
		badRequest(c, "path", fmt.Sprintf("path %q: use an absolute path", p))
		return "", false
	case strings.HasSuffix(p, "/"):
		badRequest(c, "path", fmt.Sprintf("path %q names a directory: files only", p))
		return "", false
	}
	return p, true
}

func (s *Server) getFile(c *gin.Context) {
	p, ok := guestPath(c)
	if !ok {
		return
	}
	acts, id, ok := s.guestTarget(c)
	if !ok {
		return
	}
	f, err := acts.ReadFile(c.Request.Context(), id, p)
	if err != nil {
		fail(c, err)
		return
	}
	defer f.Close()
	size := f.Size()
	if size > MaxFileBytes {
		abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%s is %d bytes, over the limit of %d: split it in the guest (exec split) or compress it first", p, size, MaxFileBytes), "path")
		return
	}
	// The first chunk is read before answering, so that a directory or an
	// unreadable file is still a clean error status.
	first := make([]byte, 64<<10)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		fail(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	if size >= 0 {
		h.Set("X-File-Size", strconv.FormatInt(size, 10))
	}
	c.Status(http.StatusOK)
	c.Writer.Write(first[:n])
	if n < len(first) {
		return
	}
	copied, err := io.Copy(c.Writer, io.LimitReader(f, MaxFileBytes-int64(n)+1))
	if err == nil && int64(n)+copied > MaxFileBytes {
		err = fmt.Errorf("%s grew over the limit of %d bytes while being read", p, MaxFileBytes)
	}
	if err != nil {
		// The status is sent: only a cut connection tells the client the
		// body is incomplete.
		s.log.Warn("file download cut short", "desktop", id, "path", p, "err", err)
		cutConnection(c)
	}
	s.cfg.Manager.Touch(id)
}

// cutConnection ends a response whose body is incomplete, so the client
// sees an error instead of a short file.
func cutConnection(c *gin.Context) {
	c.Writer.Flush()
	if conn, _, err := c.Writer.Hijack(); err == nil {
		conn.Close()
	}
}

func (s *Server) putFile(c *gin.Context) {
	p, ok := guestPath(c)
	if !ok {
		return
	}
	acts, id, ok := s.guestTarget(c)
	if !ok {
		return
	}
	if c.Request.ContentLength > MaxFileBytes {
		abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload of %d bytes is over the limit of %d", c.Request.ContentLength, MaxFileBytes), "")
		return
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, MaxFileBytes)
	n, err := acts.WriteFile(c.Request.Context(), id, p, body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload over the limit of %d bytes; nothing was written, %s is as it was", MaxFileBytes, p), "")
			return
		}
		fail(c, err)
		return
	}
	s.cfg.Manager.Touch(id)
	c.JSON(http.StatusOK, api.FileWritten{Path: p, Bytes: n})
}

func selectionOf(c *gin.Context, v string) (string, bool) {
	switch v {
	case "", "clipboard":
		return "clipboard", true
	case "primary":
		return "primary", true
	}
	badRequest(c, "selection", fmt.Sprintf("selection %q: use clipboard or primary", v))
	return "", false
}

func (s *Server) getClipboard(c *gin.Context) {
	sel, ok := selectionOf(c, c.Query("selection"))
	if !ok {
		return
	}
	acts, id, ok := s.guestTarget(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), clipboardTimeout)
	defer cancel()
	text, err := acts.Clipboard(ctx, id, sel)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Clipboard{Text: text, Selection: sel})
}

func (s *Server) putClipboard(c *gin.Context) {
	var req api.Clipboard
	if !mayDrive(c) || !decodeJSON(c, &req) {
		return
	}
	sel, ok := selectionOf(c, req.Selection)
	if !ok {
		return
	}
	if !utf8.ValidString(req.Text) || strings.ContainsRune(req.Text, 0) {
		badRequest(c, "text", "text: must be valid UTF-8 without NUL bytes")
		return
	}
	acts, id, ok := s.guestTarget(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), clipboardTimeout)
	defer cancel()
	if err := acts.SetClipboard(ctx, id, sel, req.Text); err != nil {
		fail(c, err)
		return
	}
	s.cfg.Manager.Touch(id)
	c.JSON(http.StatusOK, api.Clipboard{Text: req.Text, Selection: sel})
}
