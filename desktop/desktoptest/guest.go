package desktoptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/warmdesk/warmdesk/desktop"
)

// Guest is an in-memory qemu-guest-agent for the fake driver's machines
// (Fake.Guest): files live in a map, and programs are run by Run. It speaks
// the commands hostd uses: guest-exec and guest-exec-status, and
// guest-file-open, -read, -write, -seek, -flush and -close. Like the real
// agent it knows nothing of shells: Run sees what guest-exec was asked,
// after the coreutils wrappers `timeout` and `env` that hostd puts around
// programs are taken off (their options become Cmd fields).
type Guest struct {
	// Run runs a program to its end; an error fails the guest-exec call
	// itself, as an agent that does not answer would. Nil answers every
	// program with exit status 127, as a guest without it would.
	Run func(ctx context.Context, cmd GuestCmd) (GuestResult, error)

	mu      sync.Mutex
	dirs    map[string]bool
	files   map[string][]byte
	handles map[int64]*guestHandle
	exits   map[int]GuestResult
	next    int64
	calls   []string
}

// GuestCmd is a program guest-exec was asked to run.
type GuestCmd struct {
	Path  string
	Args  []string
	Env   []string // NAME=value, from an env wrapper
	Cwd   string   // from env -C
	Stdin []byte
	// Timeout is the seconds argument of a timeout wrapper ("" without).
	Timeout string
}

// GuestResult is how a program ended.
type GuestResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

type guestHandle struct {
	path string
	pos  int
	read bool
}

// NewGuest returns an agent with no files.
func NewGuest() *Guest {
	return &Guest{dirs: map[string]bool{"/": true}, files: map[string][]byte{}, handles: map[int64]*guestHandle{}, exits: map[int]GuestResult{}}
}

// SetFile puts a file into the guest.
func (g *Guest) SetFile(path string, data []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files[path] = append([]byte(nil), data...)
}

// MkDir makes a directory in the guest: opening it reads as the real agent
// does on ext4 (the open works, a seek to the end gives 2^63-1, a read
// fails with EISDIR).
func (g *Guest) MkDir(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dirs[path] = true
}

// IsDir says whether path is a directory in the guest.
func (g *Guest) IsDir(path string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dirs[path]
}

// File reads a guest file.
func (g *Guest) File(path string) ([]byte, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	data, ok := g.files[path]
	return append([]byte(nil), data...), ok
}

// Rename moves a guest file, as mv would.
func (g *Guest) Rename(from, to string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	data, ok := g.files[from]
	if ok {
		g.files[to] = data
		delete(g.files, from)
	}
	return ok
}

// Remove deletes a guest file.
func (g *Guest) Remove(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.files, path)
}

// Paths lists the guest's files.
func (g *Guest) Paths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for p := range g.files {
		out = append(out, p)
	}
	return out
}

// OpenHandles counts file handles not closed yet.
func (g *Guest) OpenHandles() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.handles)
}

// Calls lists the commands the agent was sent, in order.
func (g *Guest) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// call answers one agent command; handled is false for commands it leaves
// to the fake machine's own agent.
func (g *Guest) call(ctx context.Context, command string, args, result any) (handled bool, err error) {
	var raw json.RawMessage
	if args != nil {
		if raw, err = json.Marshal(args); err != nil {
			return true, err
		}
	}
	var reply any
	switch command {
	case "guest-exec":
		reply, err = g.exec(ctx, raw)
	case "guest-exec-status":
		reply, err = g.execStatus(raw)
	case "guest-file-open", "guest-file-read", "guest-file-write", "guest-file-seek", "guest-file-flush", "guest-file-close":
		reply, err = g.file(command, raw)
	default:
		return false, nil
	}
	g.mu.Lock()
	g.calls = append(g.calls, command)
	g.mu.Unlock()
	if err != nil || result == nil {
		return true, err
	}
	b, _ := json.Marshal(reply)
	return true, json.Unmarshal(b, result)
}

func (g *Guest) exec(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Path  string   `json:"path"`
		Arg   []string `json:"arg"`
		Input string   `json:"input-data"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("guest-exec: %w", err)
	}
	stdin, err := base64.StdEncoding.DecodeString(a.Input)
	if err != nil {
		return nil, fmt.Errorf("guest-exec: input-data: %w", err)
	}
	cmd := Unwrap(GuestCmd{Path: a.Path, Args: a.Arg, Stdin: stdin})
	res := GuestResult{ExitCode: 127, Stderr: []byte(cmd.Path + ": not found")}
	if g.Run != nil {
		var err error
		if res, err = g.Run(ctx, cmd); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	pid := len(g.exits) + 100
	g.exits[pid] = res
	return map[string]int{"pid": pid}, nil
}

// Unwrap takes off the wrappers hostd puts around programs,
// `timeout [-k N] SECONDS` and `env [-C DIR] [--] [K=V...]`, into the
// command's fields.
func Unwrap(c GuestCmd) GuestCmd {
	if c.Path == "timeout" {
		args := c.Args
		if len(args) >= 2 && args[0] == "-k" {
			args = args[2:]
		}
		if len(args) >= 2 {
			c.Timeout, c.Path, c.Args = args[0], args[1], args[2:]
		}
	}
	if c.Path == "env" {
		args := c.Args
		for len(args) > 0 {
			switch {
			case args[0] == "-C" && len(args) > 1:
				c.Cwd, args = args[1], args[2:]
			case args[0] == "--":
				args = args[1:]
			case strings.Contains(args[0], "="):
				c.Env, args = append(c.Env, args[0]), args[1:]
			default:
				c.Path, c.Args = args[0], args[1:]
				return c
			}
		}
	}
	return c
}

func (g *Guest) execStatus(raw json.RawMessage) (any, error) {
	var a struct {
		PID int `json:"pid"`
	}
	json.Unmarshal(raw, &a)
	g.mu.Lock()
	defer g.mu.Unlock()
	res, ok := g.exits[a.PID]
	if !ok {
		return nil, fmt.Errorf("guest-exec-status: Invalid parameter 'pid'")
	}
	return map[string]any{
		"exited": true, "exitcode": res.ExitCode,
		"out-data": base64.StdEncoding.EncodeToString(res.Stdout),
		"err-data": base64.StdEncoding.EncodeToString(res.Stderr),
	}, nil
}

func (g *Guest) file(command string, raw json.RawMessage) (any, error) {
	var a struct {
		Path   string `json:"path"`
		Mode   string `json:"mode"`
		Handle int64  `json:"handle"`
		Count  int    `json:"count"`
		Buf    string `json:"buf-b64"`
		Offset int    `json:"offset"`
		Whence any    `json:"whence"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if command == "guest-file-open" {
		_, exists := g.files[a.Path]
		switch {
		case g.dirs[a.Path] && !strings.HasPrefix(a.Mode, "r"):
			return nil, fmt.Errorf("failed to open file '%s' (mode: '%s'): Is a directory", a.Path, a.Mode)
		case g.dirs[a.Path]:
		case strings.HasPrefix(a.Mode, "r") && !exists:
			return nil, fmt.Errorf("failed to open file '%s' (mode: '%s'): No such file or directory", a.Path, a.Mode)
		case strings.HasPrefix(a.Mode, "w"):
			g.files[a.Path] = nil
		}
		g.next++
		g.handles[g.next] = &guestHandle{path: a.Path, read: strings.HasPrefix(a.Mode, "r")}
		return g.next, nil
	}
	h, ok := g.handles[a.Handle]
	if !ok {
		return nil, fmt.Errorf("handle '%d' has not been found", a.Handle)
	}
	if g.dirs[h.path] && command != "guest-file-close" {
		if command == "guest-file-seek" {
			// As on ext4, whose hashed directories (/etc) end at 2^63-1.
			if a.Whence == "end" || a.Whence == 2.0 {
				return map[string]any{"position": int64(math.MaxInt64), "eof": true}, nil
			}
			return map[string]any{"position": 0, "eof": false}, nil
		}
		return nil, fmt.Errorf("failed to read file: Is a directory")
	}
	data := g.files[h.path]
	switch command {
	case "guest-file-read":
		end := min(len(data), h.pos+a.Count)
		chunk := data[min(h.pos, end):end]
		h.pos = end
		return map[string]any{"count": len(chunk), "buf-b64": base64.StdEncoding.EncodeToString(chunk), "eof": h.pos >= len(data)}, nil
	case "guest-file-write":
		if h.read {
			return nil, fmt.Errorf("failed to write to file: Bad file descriptor")
		}
		b, err := base64.StdEncoding.DecodeString(a.Buf)
		if err != nil {
			return nil, fmt.Errorf("guest-file-write: %w", err)
		}
		g.files[h.path] = append(data[:min(h.pos, len(data))], b...)
		h.pos += len(b)
		return map[string]any{"count": len(b), "eof": false}, nil
	case "guest-file-seek":
		switch a.Whence {
		case "end", 2.0:
			h.pos = len(data) + a.Offset
		case "cur", 1.0:
			h.pos += a.Offset
		default:
			h.pos = a.Offset
		}
		return map[string]any{"position": h.pos, "eof": h.pos >= len(data)}, nil
	case "guest-file-close":
		delete(g.handles, a.Handle)
	}
	return map[string]any{}, nil
}

var _ desktop.GuestAgent = guestOrFake{}

// guestOrFake answers with the Guest what it speaks, and with the fake
// machine's own agent the rest (guest-ping, guest-set-time).
type guestOrFake struct {
	g    *Guest
	fake fakeAgent
}

func (a guestOrFake) Call(ctx context.Context, command string, args, result any) error {
	if err := a.fake.m.answering(ctx); err != nil {
		return err
	}
	if handled, err := a.g.call(ctx, command, args, result); handled {
		return err
	}
	return a.fake.Call(ctx, command, args, result)
}
