package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// proxiedBy marks a request one host of a fleet passed to another: such a
// request is served where it lands, never passed on again.
const proxiedBy = "X-Warmdesk-Proxied-By"

// Locator finds the host of a fleet that runs a desktop this host does
// not: its API address, or ok false when no host has it.
type Locator func(ctx context.Context, id string) (address string, ok bool, err error)

// toOwner passes a request for a desktop that runs on another host of the
// fleet to that host, headers, body and WebSocket upgrade alike; the host
// that serves it checks the token (a fleet shares its daemon token, and a
// desktop's own tokens are checked where the desktop runs). Requests for
// this host's desktops, and for desktops no host has, go on here.
func (s *Server) toOwner(c *gin.Context) {
	id := c.Param("id")
	if s.cfg.Locate != nil && c.FullPath() == "/v1/events" && c.Request.Header.Get(proxiedBy) == "" {
		// Events narrowed to one desktop come from its host.
		if id := eventsDesktop(c.Request); id != "" {
			s.passToOwnerOf(c, id)
			return
		}
	}
	if s.cfg.Locate == nil || id == "" || !strings.HasPrefix(c.FullPath(), "/v1/desktops/:id") {
		c.Next()
		return
	}
	if s.cfg.Moves != nil {
		// A request that comes while the desktop's state moves waits
		// for the move's end, then goes where the desktop runs.
		if err := s.cfg.Moves.Hold(c.Request.Context(), id); err != nil {
			fail(c, err)
			return
		}
	}
	if c.Request.Header.Get(proxiedBy) != "" {
		// Served where it lands, unless the desktop moved from here
		// before the host that passed it on knew.
		if _, err := s.cfg.Manager.Get(id); err == nil || s.cfg.Moves == nil || !s.cfg.Moves.MovedAway(id) {
			c.Next()
			return
		}
		s.passToOwnerOf(c, id)
		return
	}
	// The token is checked where the desktop runs; a request with none is
	// refused here, before it costs a read of the fleet's records.
	_, hasBearer := bearer(c.Request)
	_, hasProtocol := protocolToken(c.Request)
	if !hasBearer && !hasProtocol {
		c.Next()
		return
	}
	s.passToOwnerOf(c, id)
}

// passToOwnerOf passes c to the fleet host that runs desktop id when it
// is not this host's and another host has it; otherwise c goes on here.
func (s *Server) passToOwnerOf(c *gin.Context, id string) {
	if _, err := s.cfg.Manager.Get(id); err == nil {
		c.Next()
		return
	}
	addr, ok, err := s.cfg.Locate(c.Request.Context(), id)
	if err != nil {
		if isE2B(c.Request) {
			status, _ := statusOf(err)
			e2bAbort(c, status, err.Error())
			return
		}
		fail(c, err)
		c.Abort()
		return
	}
	if !ok {
		c.Next()
		return
	}
	s.passTo(c, addr, "desktop "+id)
}

// cdpToOwner passes a DevTools request by token URL (/v1/cdp/TOKEN/...)
// for a desktop another host runs to that host, which minted the token and
// checks it: a per-desktop token names its desktop in the clear.
func (s *Server) cdpToOwner(c *gin.Context) {
	id, ok := tokenDesktop(c.Param("token"))
	if s.cfg.Locate == nil || !ok || c.Request.Header.Get(proxiedBy) != "" {
		c.Next()
		return
	}
	s.passToOwnerOf(c, id)
}

// tokenDesktop is the desktop a per-desktop token names in the clear
// (unchecked: the host that runs it checks the token).
func tokenDesktop(tok string) (string, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != "wdt1" || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// eventsDesktop is the desktop a GET /v1/events is narrowed to: by
// ?desktop=, or by the desktop's own token; empty for none, and for a
// request with no token, refused here before it costs a read of the
// fleet's records.
func eventsDesktop(r *http.Request) string {
	tok, ok := bearer(r)
	if !ok {
		return ""
	}
	if id := r.URL.Query().Get("desktop"); id != "" {
		return id
	}
	id, _ := tokenDesktop(tok)
	return id
}

// passTo serves c by passing it to the fleet host at addr, headers, body
// and WebSocket upgrade alike.
func (s *Server) passTo(c *gin.Context, addr, what string) {
	target := &url.URL{Scheme: s.peers.scheme, Host: addr}
	p := &httputil.ReverseProxy{
		Transport: s.peers.transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.SetXForwarded()
			// The host the client called, kept: URLs the serving host
			// builds (a DevTools URL) name it, and a browser's Origin
			// still matches it.
			r.Out.Host = r.In.Host
			r.Out.Header.Set(proxiedBy, s.cfg.HostName)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("fleet proxy", "for", what, "host", addr, "err", err)
			message := "the host for " + what + " (" + addr + ") did not answer: " + err.Error()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			if isE2B(r) {
				json.NewEncoder(w).Encode(gin.H{"code": http.StatusBadGateway, "message": message})
				return
			}
			json.NewEncoder(w).Encode(api.Error{Error: api.ErrorBody{Code: "host_unreachable", Message: message}})
		},
		// Streams (events, exec, screenshots on change) pass at once.
		FlushInterval: -1,
	}
	p.ServeHTTP(c.Writer, c.Request)
	c.Abort()
}

// Placer chooses the fleet host for a new desktop of snapshot and holds
// its room until release: its API address, and here when it is this host.
type Placer func(ctx context.Context, snapshot string) (address string, here bool, release func(), err error)

// place chooses the host for a create made to this host of a fleet. It
// answers the request itself (an error, or the chosen host's answer,
// passed on) and says done, or leaves the create to this host, which must
// call release once the desktop's record exists (or the create failed).
func (s *Server) place(c *gin.Context) (done bool, release func()) {
	body, ok := readBody(c)
	if !ok {
		return true, nil
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	var req api.CreateDesktop
	if json.Unmarshal(body, &req) != nil || req.Snapshot == "" {
		return false, func() {} // this host's create says what is wrong
	}
	if len(req.Volumes) > 0 {
		// A volume's files are on the host that made it: the create runs
		// here, where the request named it.
		return false, func() {}
	}
	here, release, err := s.placeOrPass(c, req.Snapshot, "a desktop of "+req.Snapshot)
	if err != nil {
		fail(c, err)
		return true, nil
	}
	return !here, release
}

// placeOrPass asks the fleet for the host of a new desktop of snapshot:
// when it is another, c is passed there (here false); when it is this
// host, the create runs here and calls release once the desktop's record
// exists (or the create failed). An error is the placement's, unanswered.
func (s *Server) placeOrPass(c *gin.Context, snapshot, what string) (here bool, release func(), err error) {
	addr, here, release, err := s.cfg.Place(c.Request.Context(), snapshot)
	if errors.Is(err, desktop.ErrNotFound) {
		// No host lists the snapshot yet (one baked here since this host
		// last said what it holds): this host's create finds it, or says
		// it is missing.
		return true, func() {}, nil
	}
	if err != nil {
		return false, nil, err
	}
	if here {
		return true, release, nil
	}
	defer release()
	s.passTo(c, addr, what)
	return false, nil, nil
}

// RemoteDesktop is a desktop another host of the fleet runs, as its
// record in the fleet says; Lost when that host's lease ran out.
type RemoteDesktop struct {
	Host    string
	Lost    bool
	Desktop desktop.Desktop
}

// StateHostLost is the state shown for a desktop whose host the fleet
// lost: its real state is unknown until the host is back.
const StateHostLost = "host_lost"

// remoteViews are the views of the other hosts' desktops a caller may
// list.
func (s *Server) remoteViews(c *gin.Context) ([]api.Desktop, error) {
	if s.cfg.Others == nil {
		return nil, nil
	}
	if _, ok := grantOf(c); ok {
		return nil, nil // a desktop's own token lists its own desktop, here or there
	}
	others, err := s.cfg.Others(c.Request.Context())
	if err != nil {
		return nil, err
	}
	var out []api.Desktop
	for _, o := range others {
		v := s.view(o.Desktop)
		v.Host = o.Host
		if o.Lost {
			v.State = StateHostLost
		}
		out = append(out, v)
	}
	return out, nil
}

// snapshotFile serves one file of a snapshot to another host of the fleet
// pulling it (fleet.Puller): its manifest, or a file by role, with range
// requests for transfers cut short. A fork's template stays on its host.
func (s *Server) snapshotFile(c *gin.Context) {
	if s.cfg.Fleet == nil {
		abort(c, http.StatusConflict, "not_a_fleet", "snapshot files are served to the hosts of a fleet only", "")
		return
	}
	snap, err := s.cfg.Manager.Lineage().Catalog().Get(c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	if snap.Manifest.Ephemeral {
		abort(c, http.StatusNotFound, "not_found", "snapshot "+snap.Name+" is a fork's template: it does not leave its host", "")
		return
	}
	file := c.Param("file")
	switch file {
	case desktop.FileMemory, desktop.FileState, desktop.FileDisk, "manifest.json":
	default:
		abort(c, http.StatusNotFound, "not_found", "a snapshot has no file "+file+": ask for manifest.json, memory, state or disk.qcow2", "file")
		return
	}
	f, err := os.Open(filepath.Join(snap.Dir, file))
	if err != nil {
		fail(c, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Content-Type", "application/octet-stream")
	http.ServeContent(c.Writer, c.Request, file, info.ModTime(), f)
}
