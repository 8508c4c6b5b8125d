package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// execRequestOf turns an exec body into the service's request: cmd with
// args, or a shell line; stdin as text or bytes. The service checks the
// rest; every error names the field.
func execRequestOf(r api.ExecRequest) (drive.ExecRequest, error) {
	out := drive.ExecRequest{Args: r.Args, Env: r.Env, Cwd: r.Cwd, Timeout: time.Duration(r.Timeout), MaxOutput: r.MaxOutput}
	switch {
	case r.Cmd != "" && r.Shell != "":
		return out, input.Invalid("shell", "give cmd (with args) or shell, not both")
	case r.Shell != "":
		if len(r.Args) > 0 {
			return out, input.Invalid("args", "args go with cmd; a shell line carries its own")
		}
		out.Path, out.Args = "/bin/sh", []string{"-c", r.Shell}
	case r.Cmd != "":
		out.Path = r.Cmd
	}
	switch {
	case r.Stdin != "" && len(r.StdinBase64) > 0:
		return out, input.Invalid("stdin_base64", "give stdin or stdin_base64, not both")
	case r.Stdin != "":
		out.Stdin = []byte(r.Stdin)
	default:
		out.Stdin = r.StdinBase64
	}
	return out, out.Check()
}

// execResponse turns a result into its JSON form: text when the output is
// valid UTF-8, base64 otherwise.
func execResponse(r drive.ExecResult) api.ExecResponse {
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
	if !decodeJSON(c, &req) {
		return
	}
	er, err := execRequestOf(req)
	if err != nil {
		failWith(c, err)
		return
	}
	res, err := s.cfg.Drive.Exec(c.Request.Context(), c.Param("id"), er)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, execResponse(res))
}

func (s *Server) getFile(c *gin.Context) {
	p, id := c.Query("path"), c.Param("id")
	f, err := s.cfg.Drive.ReadFile(c.Request.Context(), id, p)
	if err != nil {
		fail(c, err)
		return
	}
	defer f.Close()
	// The first chunk is read before answering, so that a directory or an
	// unreadable file is still a clean error status. It goes before the
	// size too: a directory on ext4 seeks to an end of 2^63-1, which would
	// read as a file over the limit.
	first := make([]byte, 64<<10)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		fail(c, err)
		return
	}
	size := f.Size()
	if size > drive.MaxFileBytes {
		abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%s is %d bytes, over the limit of %d: split it in the guest (exec split) or compress it first", p, size, drive.MaxFileBytes), "path")
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
	copied, err := io.Copy(c.Writer, io.LimitReader(f, drive.MaxFileBytes-int64(n)+1))
	if err == nil && int64(n)+copied > drive.MaxFileBytes {
		err = fmt.Errorf("%s grew over the limit of %d bytes while being read", p, drive.MaxFileBytes)
	}
	if err != nil {
		// The status is sent: only a cut connection tells the client the
		// body is incomplete.
		s.log.Warn("file download cut short", "desktop", id, "path", p, "err", err)
		cutConnection(c)
	}
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
	p := c.Query("path")
	if err := drive.CheckGuestPath(p); err != nil {
		fail(c, err)
		return
	}
	if c.Request.ContentLength > drive.MaxFileBytes {
		abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload of %d bytes is over the limit of %d", c.Request.ContentLength, drive.MaxFileBytes), "")
		return
	}
	n, err := s.cfg.Drive.WriteFile(c.Request.Context(), c.Param("id"), p, c.Request.Body)
	if err != nil {
		if errors.Is(err, drive.ErrTooLarge) {
			abort(c, http.StatusRequestEntityTooLarge, "too_large", err.Error(), "")
			return
		}
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.FileWritten{Path: p, Bytes: n})
}

func (s *Server) getClipboard(c *gin.Context) {
	sel, err := drive.Selection(c.Query("selection"))
	if err != nil {
		fail(c, err)
		return
	}
	text, err := s.cfg.Drive.Clipboard(c.Request.Context(), c.Param("id"), sel)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Clipboard{Text: text, Selection: sel})
}

func (s *Server) putClipboard(c *gin.Context) {
	var req api.Clipboard
	if !decodeJSON(c, &req) {
		return
	}
	sel, err := drive.Selection(req.Selection)
	if err != nil {
		fail(c, err)
		return
	}
	if err := s.cfg.Drive.SetClipboard(c.Request.Context(), c.Param("id"), sel, req.Text); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Clipboard{Text: req.Text, Selection: sel})
}
