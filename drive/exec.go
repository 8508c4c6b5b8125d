package drive

import (
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// Bounds of the guest operations.
const (
	DefaultExecTimeout = 30 * time.Second
	MaxExecTimeout     = 10 * time.Minute
	// MaxExecOutput is what qemu-guest-agent itself keeps of each stream.
	MaxExecOutput = 16 << 20
	// MaxFileBytes bounds an upload or download through the guest agent,
	// which moves files in base64 chunks over a serial port.
	MaxFileBytes = 256 << 20
	// ClipboardTimeout bounds a clipboard read or write.
	ClipboardTimeout = 15 * time.Second
)

// ExecRequest is a program to run in a guest.
type ExecRequest struct {
	Path string
	Args []string
	Env  map[string]string
	// Cwd is the working directory, absolute; empty means the agent's.
	Cwd   string
	Stdin []byte
	// Timeout bounds the program; it is killed in the guest then. 0 takes
	// DefaultExecTimeout.
	Timeout time.Duration
	// MaxOutput bounds stdout and stderr each; 0 takes
	// desktop.DefaultMaxOutput.
	MaxOutput int
	// Unbounded (ExecStream only) runs the program until it ends or its
	// caller's context does, with no Timeout: a front door's background
	// process, which its caller ends by signal or by cancelling.
	Unbounded bool
	// Started (ExecStream only), when set, hears the guest's process id of
	// the program's process group as soon as it runs.
	Started func(pid int)
	// bare runs the program as it is, without timeout(1) around it: one of
	// this package's helpers that ends itself by its Timeout.
	bare bool
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check fills in defaults and checks the request; the error holds an
// *input.ValidationError naming the field (cmd, args[i], env.NAME, cwd,
// timeout, max_output).
func (r *ExecRequest) Check() error {
	if r.Path == "" {
		return fieldError("cmd", "required: a program (or shell: a command line)")
	}
	if strings.ContainsRune(r.Path, 0) || strings.Contains(r.Path, "=") {
		return fieldError("cmd", "%q is not a program name", r.Path)
	}
	for i, a := range r.Args {
		if strings.ContainsRune(a, 0) {
			return fieldError(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	for k, v := range r.Env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return fieldError("env."+k, "not a valid environment variable")
		}
	}
	if r.Cwd != "" && (!path.IsAbs(r.Cwd) || strings.ContainsRune(r.Cwd, 0)) {
		return fieldError("cwd", "%q: use an absolute path", r.Cwd)
	}
	if r.Unbounded {
		r.Timeout = 0
	} else if r.Timeout == 0 {
		r.Timeout = DefaultExecTimeout
	}
	if !r.Unbounded && (r.Timeout < 0 || r.Timeout > MaxExecTimeout) {
		return fieldError("timeout", "%s: use up to %s", r.Timeout, MaxExecTimeout)
	}
	if r.MaxOutput < 0 || r.MaxOutput > MaxExecOutput {
		return fieldError("max_output", "%d: use 0 (1 MiB) to %d bytes", r.MaxOutput, MaxExecOutput)
	}
	if r.MaxOutput == 0 {
		r.MaxOutput = desktop.DefaultMaxOutput
	}
	return nil
}

// CheckGuestPath checks a path for the files operations: absolute, no NUL,
// not a directory name.
func CheckGuestPath(p string) error {
	switch {
	case p == "":
		return &FieldError{"path", "path: required, an absolute path in the guest (?path=/tmp/file)"}
	case !path.IsAbs(p) || strings.ContainsRune(p, 0):
		return &FieldError{"path", fmt.Sprintf("path %q: use an absolute path", p)}
	case strings.HasSuffix(p, "/"):
		return &FieldError{"path", fmt.Sprintf("path %q names a directory: files only", p)}
	}
	return nil
}

// Selection names an X selection for the clipboard operations: "" and
// "clipboard" are CLIPBOARD, "primary" is PRIMARY.
func Selection(v string) (string, error) {
	switch v {
	case "", "clipboard":
		return "clipboard", nil
	case "primary":
		return "primary", nil
	}
	return "", &FieldError{"selection", fmt.Sprintf("selection %q: use clipboard or primary", v)}
}

// checkClipboardText refuses text an X selection cannot carry as text.
func checkClipboardText(text string) error {
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return &FieldError{"text", "text: must be valid UTF-8 without NUL bytes"}
	}
	return nil
}

// FieldError is a bad request value whose message names the field itself.
// It is a desktop.ErrInvalid.
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Message }

// FieldName is the request field at fault.
func (e *FieldError) FieldName() string { return e.Field }

func (e *FieldError) Unwrap() error { return desktop.ErrInvalid }

// fieldError is a bad request value: an *input.ValidationError naming the
// field, which is a desktop.ErrInvalid too.
func fieldError(field, format string, args ...any) error {
	return &invalidError{input.Invalid(field, format, args...)}
}

// invalidError is an error of input's vocabulary that is also a
// desktop.ErrInvalid: input knows no domain, and the callers that classify
// the service's errors (web, e2b) look for desktop.ErrInvalid. Its text
// and field are the wrapped error's.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }

func (e *invalidError) Unwrap() error { return e.err }

func (e *invalidError) Is(target error) bool { return target == desktop.ErrInvalid }

// asInvalid makes an input error (errors.Is(err, input.ErrInvalid)) a
// desktop.ErrInvalid as well; other errors pass unchanged.
func asInvalid(err error) error {
	if errors.Is(err, input.ErrInvalid) && !errors.Is(err, desktop.ErrInvalid) {
		return &invalidError{err}
	}
	return err
}
