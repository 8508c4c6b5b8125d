// Package e2b is warmdesk's E2B front door: the subset of E2B's control
// plane and of its in-sandbox daemon (envd: Connect-RPC process and
// filesystem services, /files, /health) that the unmodified `e2b` and
// `@e2b/desktop` SDKs call, mapped onto desktop.Manager for lifecycles and
// the drive service for everything in the guest. An E2B sandbox is a
// warmdesk desktop; its id is the desktop's.
//
// Both of E2B's base URLs are this one handler (hostd mounts it at /e2b):
// control-plane requests carry X-API-KEY, in-sandbox ones E2b-Sandbox-Id
// and the sandbox's access token.
package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// Lifecycle is what the front door needs of desktop.Manager.
type Lifecycle interface {
	Create(ctx context.Context, req desktop.CreateRequest) (desktop.Desktop, error)
	Get(id string) (desktop.Desktop, error)
	List() []desktop.Desktop
	Delete(ctx context.Context, id string) error
	Hibernate(ctx context.Context, id string) (desktop.Desktop, error)
	Wake(ctx context.Context, id string) (desktop.Desktop, error)
	Resume(ctx context.Context, id string) (desktop.Desktop, error)
	SetExpiry(id string, at time.Time) (desktop.Desktop, error)
}

// Guest is what it needs of the drive service.
type Guest interface {
	Exec(ctx context.Context, id string, req drive.ExecRequest) (drive.ExecResult, error)
	ExecStream(ctx context.Context, id string, req drive.ExecRequest, out func(stream string, data []byte)) (drive.ExecResult, error)
	Signal(ctx context.Context, id string, pid int, signal string) error
	ReadFile(ctx context.Context, id, path string) (drive.GuestFile, error)
	WriteFile(ctx context.Context, id, path string, r io.Reader) (int64, error)
	// The filesystem service's calls, as the call's user.
	Stat(ctx context.Context, id string, user drive.GuestUser, path string) (drive.FileEntry, error)
	ListDir(ctx context.Context, id string, user drive.GuestUser, path string, depth int) ([]drive.FileEntry, error)
	MakeDir(ctx context.Context, id string, user drive.GuestUser, path string) (drive.FileEntry, error)
	Move(ctx context.Context, id string, user drive.GuestUser, src, dst string) (drive.FileEntry, error)
	Remove(ctx context.Context, id string, user drive.GuestUser, path string) error
	// For the fast paths: the screen mirror and the input path.
	LiveScreen(ctx context.Context, id string) (drive.Screen, desktop.Desktop, error)
	Run(ctx context.Context, id string, req drive.Request) (drive.Outcome, error)
}

// Config wires a Server.
type Config struct {
	Desktops Lifecycle
	// Events are the Manager's (required): a deleted or reset sandbox's
	// processes and users are forgotten.
	Events *desktop.Events
	Guest  Guest
	// DaemonToken returns hostd's current token: an API key is it (with or
	// without E2B's "e2b_" prefix), and each sandbox's access token is
	// derived from it, so a rotation revokes both.
	DaemonToken func() string
	// Templates maps E2B template ids to snapshot names; a template not
	// listed is taken as a snapshot's own name.
	Templates map[string]string
	// Domain, when set, is returned as each sandbox's domain: the SDK
	// builds https://PORT-ID.DOMAIN from it (the desktop stream's URL).
	Domain string
	// Others lists the sandboxes the fleet's other hosts run, for the
	// list (calls on them reach their hosts through hostd's proxy); nil
	// on a single host.
	Others func(ctx context.Context) ([]desktop.Desktop, error)
	// GuestOnly turns the fast paths off: every command runs in the guest
	// as sent (the bench compares both).
	GuestOnly bool
	Logger    *slog.Logger
}

// EnvdVersion is the envd version sandboxes report; the SDKs gate
// features on it. 0.5.7: no user sent by default (>= 0.4.0), uploads as
// multipart or octet-stream (>= 0.5.7); nothing newer (watch options,
// write metadata) is claimed.
const EnvdVersion = "0.5.7"

// Server serves the E2B API and envd.
type Server struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	procs *processes
	users *userCache
	shots *shotStore
}

// New builds the routes. ctx bounds the background processes it runs:
// they end with it.
func New(ctx context.Context, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), users: newUserCache(), shots: newShotStore()}
	s.procs = newProcesses(ctx, cfg.Guest, cfg.Logger)
	go s.forgetDeleted(ctx)

	api := func(h http.HandlerFunc) http.Handler { return s.apiAuth(h) }
	s.mux.Handle("POST /v2/sandboxes", api(s.createSandbox))
	s.mux.Handle("POST /sandboxes", api(s.createSandbox)) // SDKs before 2.51
	s.mux.Handle("GET /v2/sandboxes", api(s.listSandboxes))
	s.mux.Handle("GET /sandboxes", api(s.listSandboxes))
	s.mux.Handle("POST /v2/sandboxes/{id}/connect", api(s.connectSandbox))
	s.mux.Handle("POST /sandboxes/{id}/connect", api(s.connectSandbox))
	s.mux.Handle("POST /sandboxes/{id}/resume", api(s.connectSandbox))
	s.mux.Handle("GET /sandboxes/{id}", api(s.getSandbox))
	s.mux.Handle("DELETE /sandboxes/{id}", api(s.killSandbox))
	s.mux.Handle("POST /sandboxes/{id}/timeout", api(s.setTimeout))
	s.mux.Handle("POST /sandboxes/{id}/pause", api(s.pauseSandbox))

	envd := func(h func(http.ResponseWriter, *http.Request, desktop.Desktop)) http.Handler { return s.envdAuth(h) }
	s.mux.Handle("POST /process.Process/{method}", envd(s.processRPC))
	s.mux.Handle("POST /filesystem.Filesystem/{method}", envd(s.filesystemRPC))
	s.mux.Handle("GET /files", envd(s.readFiles))
	s.mux.Handle("POST /files", envd(s.writeFiles))
	s.mux.Handle("GET /health", envd(s.health))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("E2b-Sandbox-Id") != "" {
			writeUnaryError(w, rpcErrorf(CodeUnimplemented, "%s %s is not implemented by warmdesk's envd (see docs/E2B.md)", r.Method, r.URL.Path))
			return
		}
		apiError(w, http.StatusNotFound, "%s %s is not part of warmdesk's E2B API (see docs/E2B.md)", r.Method, r.URL.Path)
	})
	return s
}

// ServeHTTP serves a request whose path has lost hostd's /e2b prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// apiError answers a control-plane request in E2B's error shape: the SDK
// reads the numeric code from the body, not the status line.
func apiError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"code": status, "message": sprintf(format, args...)})
}

// statusOf classifies a domain error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, desktop.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, desktop.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, desktop.ErrConflict), errors.Is(err, desktop.ErrControlled):
		return http.StatusConflict
	case errors.Is(err, desktop.ErrCapacity):
		return http.StatusTooManyRequests
	case errors.Is(err, desktop.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, desktop.ErrUnavailable), errors.Is(err, desktop.ErrBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, drive.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// rpcOf classifies a domain error as a Connect error.
func rpcOf(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	code := CodeInternal
	switch statusOf(err) {
	case http.StatusNotFound:
		code = CodeNotFound
	case http.StatusBadRequest:
		code = CodeInvalidArgument
	case http.StatusConflict:
		code = CodeFailedPrecondition
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		code = CodeResourceExhausted
	case http.StatusServiceUnavailable:
		code = CodeUnavailable
	}
	if errors.Is(err, context.DeadlineExceeded) {
		code = CodeDeadlineExceeded
	}
	return &RPCError{Code: code, Message: err.Error()}
}

// apiAuth checks X-API-KEY against the daemon's token.
func (s *Server) apiAuth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("X-API-KEY"), "e2b_")
		daemon := s.cfg.DaemonToken()
		if key == "" || daemon == "" || subtle.ConstantTimeCompare([]byte(key), []byte(daemon)) != 1 {
			apiError(w, http.StatusUnauthorized, "X-API-KEY must be hostd's token (E2B_API_KEY=e2b_TOKEN or TOKEN)")
			return
		}
		h(w, r)
	})
}

// AccessToken is a sandbox's envd token: an HMAC of its id under the
// daemon's token, so it reaches that sandbox only and needs no storage.
func AccessToken(daemonToken, id string) string {
	mac := hmac.New(sha256.New, []byte(daemonToken))
	mac.Write([]byte("warmdesk e2b envd " + id))
	return "wde2b_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// envdAuth checks a request into a sandbox: E2b-Sandbox-Id names a
// desktop and X-Access-Token is that sandbox's token. Errors take
// Connect's shape for RPCs and envd's JSON for /files and /health.
func (s *Server) envdAuth(h func(http.ResponseWriter, *http.Request, desktop.Desktop)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpc := strings.Contains(r.URL.Path, ".")
		fail := func(status int, code, msg string) {
			if rpc {
				writeUnaryError(w, &RPCError{Code: code, Message: msg})
				return
			}
			apiError(w, status, "%s", msg)
		}
		id := r.Header.Get("E2b-Sandbox-Id")
		if id == "" {
			fail(http.StatusBadRequest, CodeInvalidArgument, "E2b-Sandbox-Id is missing: set E2B_SANDBOX_URL to hostd's /e2b and use the SDK")
			return
		}
		daemon := s.cfg.DaemonToken()
		tok := r.Header.Get("X-Access-Token")
		if daemon == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(AccessToken(daemon, id))) != 1 {
			fail(http.StatusUnauthorized, CodeUnauthenticated, "X-Access-Token is not sandbox "+id+"'s access token (the SDK sends the one create or connect returned)")
			return
		}
		d, err := s.cfg.Desktops.Get(id)
		if err != nil {
			// The SDK reads 502 from envd as "the sandbox is gone".
			fail(http.StatusBadGateway, CodeNotFound, "sandbox "+id+" does not exist (killed or expired)")
			return
		}
		h(w, r, d)
	})
}

// forgetDeleted ends the processes of deleted sandboxes and forgets
// their users.
func (s *Server) forgetDeleted(ctx context.Context) {
	events, stop := s.cfg.Events.Subscribe()
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				stop()
				events, stop = s.cfg.Events.Subscribe()
				continue
			}
			switch ev.Type {
			case desktop.EventDeleted, desktop.EventReset:
				s.procs.forget(ev.Desktop.ID)
				s.users.forget(ev.Desktop.ID)
				s.shots.forget(ev.Desktop.ID)
			}
		}
	}
}
