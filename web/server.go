// Package web is hostd's HTTP face: the versioned JSON API under /v1, the
// WebSocket channels (control, VNC for noVNC), the dashboard and viewer
// pages, and the mapping of domain errors to HTTP statuses. It decodes,
// calls desktop.Manager for lifecycles and the drive service for everything
// that drives a desktop, and encodes: it never reaches a driver.
package web

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/recording"
	"github.com/warmdesk/warmdesk/vnc"
)

// Config wires a Server.
type Config struct {
	Manager *desktop.Manager
	// Drive drives the desktops and keeps their screens. Required.
	Drive *drive.Service
	// Token is the daemon's bearer token; every route but /healthz needs it.
	Token string
	// RotateToken makes, keeps and returns a new daemon token (POST
	// /v1/token/rotate); nil: rotation is not offered.
	RotateToken func() (string, error)
	Logger      *slog.Logger
	Metrics     *Metrics
	// Images lists the built images (GET /v1/images); nil: none listed.
	Images func() ([]api.GuestImage, error)
	// Recordings keeps recordings of desktops' screens; nil: recording is
	// refused with 503.
	Recordings *recording.Registry
	// E2B, when set, builds the E2B front door served under /e2b, given
	// the daemon's current token (its API key; rotations apply at once)
	// and, in a fleet, what lists the desktops the other hosts run (nil
	// on a single host).
	E2B func(daemonToken func() string, others func(context.Context) ([]desktop.Desktop, error)) http.Handler
	// Fleet lists the fleet this host belongs to (GET /v1/fleet); nil on
	// a single host.
	Fleet func(ctx context.Context) (api.Fleet, error)
	// Locate finds the host of the fleet that runs a desktop this host
	// does not, whose requests are passed to it (fleetproxy.go); nil on a
	// single host. HostName names this host in what it passes on.
	Locate   Locator
	HostName string
	// Place chooses the host of the fleet a create made here runs on; nil
	// on a single host.
	Place Placer
	// Drain stops (or restarts) placing new desktops on a host of the
	// fleet; nil on a single host.
	Drain func(ctx context.Context, host string, on bool) error
	// EnsureSnapshot pulls a snapshot this host of a fleet lacks from a
	// host that holds it, before a create; nil on a single host.
	EnsureSnapshot func(ctx context.Context, name string) error
	// Members grows and shrinks the fleet's embedded etcd; nil on a single
	// host.
	Members FleetMembers
	// Moves and MoveTarget move running desktops between the fleet's
	// hosts (fleetmove.go); nil on a single host.
	Moves      *desktop.Moves
	MoveTarget MoveTarget
	// PeerTLS is this host's client side of the mutual TLS between the
	// hosts of a fleet (fleetpeers.go): requests to other hosts use it,
	// and requests another host passed on are taken on PeerHandler only.
	// nil: hosts call each other in the clear (a single host, the bench).
	PeerTLS *tls.Config
	// Others lists the desktops the fleet's other hosts run, for the
	// fleet-wide list; nil on a single host.
	Others func(ctx context.Context) ([]RemoteDesktop, error)
	// Peers lists the API addresses of the fleet's other live hosts, whose
	// events GET /v1/events passes on; nil on a single host.
	Peers func(ctx context.Context) ([]string, error)
	// PullEvents subscribes to this host's snapshot pulls' events; nil on
	// a single host.
	PullEvents func() (<-chan api.Event, func())
	// MaxViewersPerDesktop and MaxViewersPerToken cap the VNC WebSockets
	// open at once; 0 takes the package's defaults.
	MaxViewersPerDesktop, MaxViewersPerToken int
	// CPU is the Manager's CPU admission and Limits its caps, for GET
	// /v1/host and the metrics; zero: none shown.
	CPU    *desktop.CPUAdmission
	Limits desktop.Limits
}

// Server serves the API and pages.
type Server struct {
	cfg     Config
	log     *slog.Logger
	engine  *gin.Engine
	views   *viewTokens
	viewers *viewerCount
	token   atomic.Pointer[string] // the daemon's token, swapped by a rotation
	// rotating serialises rotations of the daemon's token.
	rotating sync.Mutex
	vnc      vnc.ProxyStats
	tcp      tcpListeners
	peers    peerLink
}

// New builds the routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Manager)
	}
	cfg.Metrics.states.cpu.Store(cfg.CPU)
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: cfg, log: cfg.Logger, engine: gin.New(), views: newViewTokens(), viewers: newViewerCount(cfg.MaxViewersPerDesktop, cfg.MaxViewersPerToken)}
	s.token.Store(&cfg.Token)
	s.peers = newPeerLink(cfg)
	s.engine.Use(s.recoverPanics, s.logRequests, s.peersOnly)
	s.engine.GET("/healthz", s.healthz)
	s.mcpRoutes(s.engine)
	if cfg.E2B != nil {
		// The SDKs' two base URLs are both hostd's /e2b; the front door
		// checks its own keys (X-API-KEY, sandbox access tokens).
		door := cfg.E2B(s.daemonToken, s.othersRunning())
		var snapshotOf func(string) string
		if t, ok := door.(interface{ SnapshotOf(string) string }); ok {
			snapshotOf = t.SnapshotOf
		}
		// In a fleet, a request about another host's sandbox goes there.
		s.engine.Any("/e2b/*path", s.e2bToOwner(snapshotOf), gin.WrapH(http.StripPrefix("/e2b", door)))
	}
	s.pages(s.engine)

	v1 := s.engine.Group("/v1", s.toOwner, s.auth)
	v1.GET("/desktops", need(needView), s.listDesktops) // a per-desktop token sees its own
	v1.POST("/desktops", need(needDaemon), s.createDesktop)
	v1.GET("/desktops/:id", need(needView), s.getDesktop)
	v1.DELETE("/desktops/:id", need(needDaemon), s.deleteDesktop)
	v1.POST("/desktops/:id/move", need(needDaemon), s.moveDesktop)
	for _, op := range []string{"pause", "resume", "hibernate", "wake", "fork", "snapshot"} {
		v1.POST("/desktops/:id/"+op, need(needDaemon), s.desktopOp(op))
	}
	v1.POST("/desktops/:id/reset", need(needControl), s.resetDesktop)
	v1.GET("/desktops/:id/screenshot", need(needView), s.screenshot)
	v1.GET("/desktops/:id/screenshot/settled", need(needView), s.screenshotSettled)
	v1.GET("/desktops/:id/vnc", need(needView), s.vncSocket) // mode=control needs control
	v1.POST("/desktops/:id/vnc/tcp", need(needDaemon), s.openVNCListener)
	v1.DELETE("/desktops/:id/vnc/tcp", need(needDaemon), s.closeVNCListener)
	// Snapshots list which desktops they came from: the host's business.
	v1.GET("/images", need(needDaemon), s.listImages)
	v1.GET("/snapshots", need(needDaemon), s.listSnapshots)
	v1.GET("/snapshots/:name", need(needDaemon), s.getSnapshot)
	v1.DELETE("/snapshots/:name", need(needDaemon), s.deleteSnapshot)
	v1.GET("/events", need(needView), s.eventStream) // a per-desktop token sees its own
	s.actionRoutes(v1)
	s.windowRoutes(v1)
	s.networkRoutes(v1)
	s.volumeRoutes(v1)
	s.devtoolsRoutes(v1)
	s.recordingRoutes(v1)
	v1.POST("/token/rotate", need(needDaemon), s.rotateToken)
	v1.GET("/host", need(needDaemon), s.getHost)
	v1.GET("/fleet", need(needDaemon), s.getFleet)
	v1.GET("/fleet/snapshots/:name/:file", need(needDaemon), s.snapshotFile)
	v1.POST("/fleet/moves", need(needDaemon), s.takeMove)
	v1.GET("/fleet/members", need(needDaemon), s.listMembers)
	v1.POST("/fleet/members", need(needDaemon), s.addMember)
	v1.DELETE("/fleet/members/:name", need(needDaemon), s.removeMember)
	v1.POST("/fleet/hosts/:name/drain", need(needDaemon), s.drainHost(true))
	v1.DELETE("/fleet/hosts/:name/drain", need(needDaemon), s.drainHost(false))
	s.engine.GET("/metrics", s.auth, need(needDaemon), gin.WrapH(cfg.Metrics.Handler()))
	return s
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

// auth checks the daemon's bearer token (or a per-desktop token for the
// routes that accept one). A wrong token is refused before anything else.
func (s *Server) auth(c *gin.Context) {
	if tok, ok := bearer(c.Request); ok && s.validDaemonToken(tok) {
		c.Next()
		return
	}
	// Browsers cannot set headers on a WebSocket: the viewer sends the
	// token as the WebSocket subprotocol "bearer.TOKEN" instead (never in
	// the URL, which would land in logs).
	if tok, ok := protocolToken(c.Request); ok {
		if s.validDaemonToken(tok) {
			c.Next()
			return
		}
		if grant, ok := s.views.check(tok, c.Param("id")); ok {
			c.Set(grantKey, grant)
			c.Next()
			return
		}
	}
	if tok, ok := bearer(c.Request); ok {
		if grant, ok := s.views.check(tok, c.Param("id")); ok {
			c.Set(grantKey, grant)
			c.Next()
			return
		}
	}
	c.Header("WWW-Authenticate", `Bearer realm="warmdesk"`)
	abort(c, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required (Authorization: Bearer TOKEN); hostd printed it at first start and keeps it in its state directory", "")
}

// daemonToken is the daemon's current token.
func (s *Server) daemonToken() string {
	if t := s.token.Load(); t != nil {
		return *t
	}
	return ""
}

func (s *Server) validDaemonToken(tok string) bool {
	daemon := s.token.Load()
	return daemon != nil && *daemon != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(*daemon)) == 1
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok && tok != "" {
		return strings.TrimSpace(tok), true
	}
	return "", false
}

const protocolPrefix = "bearer."

func protocolToken(r *http.Request) (string, bool) {
	for _, p := range websocketProtocols(r) {
		if tok, ok := strings.CutPrefix(p, protocolPrefix); ok && tok != "" {
			return tok, true
		}
	}
	return "", false
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r) // a response cut short on purpose: net/http drops the connection
			}
			s.log.Error("panic in handler", "path", c.Request.URL.Path, "panic", r)
			abort(c, http.StatusInternalServerError, "internal", "internal error", "")
		}
	}()
	c.Next()
}

// logRequests logs method, route and status; never the query string, which
// could hold secrets someone put there anyway.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.log.Debug("http", "method", c.Request.Method, "route", c.FullPath(), "status", c.Writer.Status(), "took", time.Since(start))
}

// getFleet lists the fleet's hosts; a single host has none to list.
// getHost answers what the host admits now (api.Host).
func (s *Server) getHost(c *gin.Context) {
	h := api.Host{MaxDesktops: s.cfg.Limits.MaxDesktops, MaxMemoryMiB: s.cfg.Limits.MaxMemoryMiB}
	h.Desktops, h.MemoryMiB = desktop.Holding(s.cfg.Manager.List())
	cpu := s.cfg.CPU.Status()
	h.CPU = api.HostCPU{Pressure: cpu.Pressure, Source: cpu.Source, WindowS: cpu.Window.Seconds(), Bound: cpu.Bound,
		Queued: cpu.Queued, Admitted: cpu.Admitted, Refused: cpu.Refused}
	c.JSON(http.StatusOK, h)
}

func (s *Server) getFleet(c *gin.Context) {
	if s.cfg.Fleet == nil {
		abort(c, http.StatusConflict, "not_a_fleet", "this hostd is a single host: start it with --cluster-name to make it one host of a fleet (docs/FLEET.md)", "")
		return
	}
	f, err := s.cfg.Fleet(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, f)
}

// drainHost stops (on) or restarts placing new desktops on a fleet host.
func (s *Server) drainHost(on bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.cfg.Drain == nil {
			abort(c, http.StatusConflict, "not_a_fleet", "this hostd is a single host: there is nothing to drain it from", "")
			return
		}
		if err := s.cfg.Drain(c.Request.Context(), c.Param("name"), on); err != nil {
			fail(c, err)
			return
		}
		if s.cfg.Fleet == nil {
			c.Status(http.StatusNoContent)
			return
		}
		f, err := s.cfg.Fleet(c.Request.Context())
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, f)
	}
}
