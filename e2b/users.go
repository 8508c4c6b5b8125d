package e2b

import (
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// E2B runs commands and writes files as a user, "user" unless the call
// names another. warmdesk's own images have only root; a snapshot whose
// guest has an account "user" (the e2b-desktop recipe's) runs as it.
const defaultUser = "user"

var userName = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)

// userOf reads the user a call asks for: envd's RPCs send it as HTTP
// Basic (the user, no password), /files as ?username=. "" means the
// default.
func userOf(r *http.Request, query string) (string, error) {
	u := query
	if h := r.Header.Get("Authorization"); u == "" && h != "" {
		raw, ok := strings.CutPrefix(h, "Basic ")
		dec, err := base64.StdEncoding.DecodeString(raw)
		if !ok || err != nil {
			return "", rpcErrorf(CodeUnauthenticated, "Authorization: envd takes Basic base64(USER:)")
		}
		u, _, _ = strings.Cut(string(dec), ":")
	}
	if u != "" && !userName.MatchString(u) {
		return "", rpcErrorf(CodeInvalidArgument, "user %q is not a user name", u)
	}
	return u, nil
}

// account is a guest user: name, ids, home and login shell.
type account struct{ name, uid, gid, home, shell string }

// userCache remembers each sandbox's users: one guest round trip per
// user, not per command. The default user comes with the snapshot, so
// it is also remembered per snapshot: a new sandbox's first command needs
// no lookup (it is the slowest, its guest not yet warm under TCG).
type userCache struct {
	mu         sync.Mutex
	m          map[string]map[string]account // sandbox, asked name ("" default)
	bySnapshot map[string]account            // the default user
}

func newUserCache() *userCache {
	return &userCache{m: map[string]map[string]account{}, bySnapshot: map[string]account{}}
}

func (c *userCache) get(d desktop.Desktop, asked string) (account, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.m[d.ID][asked]; ok {
		return a, true
	}
	a, ok := c.bySnapshot[d.Snapshot]
	return a, ok && asked == ""
}

func (c *userCache) put(d desktop.Desktop, asked string, a account) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[d.ID] == nil {
		c.m[d.ID] = map[string]account{}
	}
	c.m[d.ID][asked] = a
	if asked == "" {
		c.bySnapshot[d.Snapshot] = a
	}
}

func (c *userCache) forget(sandbox string) {
	c.mu.Lock()
	delete(c.m, sandbox)
	c.mu.Unlock()
}

// homeScript prints a user's home, or exits 2 when there is no such user.
// With no name, it takes "user" when the guest has one, else root.
const homeScript = `u=${1:-` + defaultUser + `}
if ! ent=$(getent passwd "$u"); then
  [ -z "$1" ] || { echo "no user $u in the sandbox" >&2; exit 2; }
  ent=$(getent passwd root)
fi
printf '%s\n' "$ent" | tr : '\n'`

// account resolves the user a call runs as.
func (s *Server) account(ctx context.Context, d desktop.Desktop, asked string) (account, error) {
	if a, ok := s.users.get(d, asked); ok {
		return a, nil
	}
	sandbox := d.ID
	res, err := s.run(ctx, sandbox, drive.ExecRequest{Path: "/bin/sh", Args: []string{"-c", homeScript, "sh", asked}})
	if err != nil {
		return account{}, err
	}
	if res.code == 2 {
		return account{}, rpcErrorf(CodeInvalidArgument, "user %q does not exist in sandbox %s", asked, sandbox)
	}
	a, ok := parsePasswd(string(res.stdout))
	if res.code != 0 || !ok {
		return account{}, rpcErrorf(CodeInternal, "sandbox %s: could not look up user %q (exit %d: %s)", sandbox, asked, res.code, res.message())
	}
	s.users.put(d, asked, a)
	return a, nil
}

// parsePasswd reads a passwd entry's fields, one per line.
func parsePasswd(out string) (account, bool) {
	f := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(f) != 7 {
		return account{}, false
	}
	a := account{name: f[0], uid: f[2], gid: f[3], home: f[5], shell: f[6]}
	_, err1 := strconv.ParseUint(a.uid, 10, 32)
	_, err2 := strconv.ParseUint(a.gid, 10, 32)
	if err1 != nil || err2 != nil || !userName.MatchString(a.name) || !path.IsAbs(a.home) {
		return account{}, false
	}
	return a, true
}

// helperTimeout bounds the small guest commands behind envd's calls.
const helperTimeout = 30 * time.Second

// helperResult is how a helper ended.
type helperResult struct {
	stdout, stderr []byte
	code           int
}

// message is a failed helper's complaint.
func (h helperResult) message() string {
	return strings.TrimSpace(string(h.stderr))
}

// run runs a helper in the guest and waits for it. It captures the
// output in the agent's exec rather than streaming it through files: a
// helper's output is small and wanted whole, and streaming costs a file
// open, read and close per stream in the guest.
func (s *Server) run(ctx context.Context, sandbox string, req drive.ExecRequest) (helperResult, error) {
	if req.Timeout == 0 {
		req.Timeout = helperTimeout
	}
	if req.MaxOutput == 0 {
		req.MaxOutput = drive.MaxExecOutput
	}
	res, err := s.cfg.Guest.Exec(ctx, sandbox, req)
	if err != nil {
		return helperResult{}, err
	}
	if res.TimedOut {
		return helperResult{}, rpcErrorf(CodeDeadlineExceeded, "sandbox %s: %s did not finish within %s", sandbox, req.Path, req.Timeout)
	}
	if res.StdoutTruncated {
		return helperResult{}, rpcErrorf(CodeResourceExhausted, "sandbox %s: %s wrote more than %d bytes, more than hostd reads back from one call", sandbox, req.Path, req.MaxOutput)
	}
	return helperResult{stdout: res.Stdout, stderr: res.Stderr, code: res.ExitCode}, nil
}

// resolvePath makes a path absolute against the user's home, as envd
// does.
func resolvePath(p string, a account) (string, error) {
	if p == "" {
		return "", rpcErrorf(CodeInvalidArgument, "path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", rpcErrorf(CodeInvalidArgument, "path %q contains a NUL byte", p)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = a.home + p[1:]
	}
	if !path.IsAbs(p) {
		p = path.Join(a.home, p)
	}
	return path.Clean(p), nil
}

// runAs is the exec request of a process config, run as the user with
// the sandbox's environment under the process's own.
func (s *Server) runAs(ctx context.Context, d desktop.Desktop, asked string, cfg processConfig) (drive.ExecRequest, error) {
	a, err := s.account(ctx, d, asked)
	if err != nil {
		return drive.ExecRequest{}, err
	}
	env := maps.Clone(d.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.Envs)
	env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"] = a.home, a.name, a.name, a.shell
	cwd := a.home
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		if cwd, err = resolvePath(*cfg.Cwd, a); err != nil {
			return drive.ExecRequest{}, err
		}
	}
	req := drive.ExecRequest{Path: cfg.Cmd, Args: cfg.Args, Env: env, Cwd: cwd, MaxOutput: drive.MaxExecOutput}
	req.Path, req.Args = a.wrap(cfg.Cmd, cfg.Args)
	if err := req.Check(); err != nil {
		return drive.ExecRequest{}, rpcErrorf(CodeInvalidArgument, "%v", err)
	}
	return req, nil
}

// guest is the account as drive knows a guest user.
func (a account) guest() drive.GuestUser { return drive.GuestUser{UID: a.uid, GID: a.gid} }

// wrap runs a program as the account; the caller sets HOME and the rest.
func (a account) wrap(program string, args []string) (string, []string) {
	return a.guest().Wrap(program, args)
}

// asUser wraps a helper script to run as the account.
func asUser(a account, script string, args ...string) drive.ExecRequest {
	p, argv := a.wrap("/bin/sh", append([]string{"-c", script, "sh"}, args...))
	return drive.ExecRequest{Path: p, Args: argv}
}
