package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/vnc"
)

// liveScreen finds a desktop's screen, once its mirror holds a frame. A
// paused desktop still has a screen; a hibernated or failed one does not.
func (s *Server) liveScreen(c *gin.Context) (drive.Screen, bool) {
	scr, _, err := s.cfg.Drive.LiveScreen(c.Request.Context(), c.Param("id"))
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return scr, true
}

func (s *Server) screenshot(c *gin.Context) {
	opts, err := screenshot.ParseOptions(c.Request.URL.Query())
	if err != nil {
		fail(c, fmt.Errorf("%w: %w", desktop.ErrInvalid, err))
		return
	}
	if !s.mayScale(c, opts) {
		return
	}
	scr, ok := s.liveScreen(c)
	if !ok {
		return
	}
	s.sendShot(c, scr, opts, nil)
}

// mayScale refuses a picture larger than the screen to any token but the
// daemon's: an upscaled 8192x8192 PNG costs hundreds of MiB and seconds of
// CPU per request and shows nothing more.
func (s *Server) mayScale(c *gin.Context, opts screenshot.Options) bool {
	if isDaemon(c) || (opts.Width == 0 && opts.Height == 0) {
		return true
	}
	native, err := s.cfg.Drive.ScreenSize(c.Param("id"))
	if err != nil {
		fail(c, err)
		return false
	}
	if opts.Width > native.X || opts.Height > native.Y {
		badRequest(c, "width", fmt.Sprintf("%dx%d is larger than the %dx%d screen: ask for its size or less (only the daemon's token may have a picture upscaled)", opts.Width, opts.Height, native.X, native.Y))
		return false
	}
	return true
}

// screenshotSettled waits for the screen to stop changing, then captures.
func (s *Server) screenshotSettled(c *gin.Context) {
	q := c.Request.URL.Query()
	quiet, err := msParam(q.Get("quiet_ms"), screenshot.DefaultQuiet, 10*time.Millisecond, 10*time.Second)
	if err != nil {
		badRequest(c, "quiet_ms", err.Error())
		return
	}
	timeout, err := msParam(q.Get("timeout_ms"), 5*time.Second, 0, time.Minute)
	if err != nil {
		badRequest(c, "timeout_ms", err.Error())
		return
	}
	q.Del("quiet_ms")
	q.Del("timeout_ms")
	opts, err := screenshot.ParseOptions(q)
	if err != nil {
		fail(c, fmt.Errorf("%w: %w", desktop.ErrInvalid, err))
		return
	}
	if !s.mayScale(c, opts) {
		return
	}
	scr, ok := s.liveScreen(c)
	if !ok {
		return
	}
	st, err := screenshot.WaitSettled(c.Request.Context(), scr.Source(), quiet, timeout)
	if err != nil {
		fail(c, fmt.Errorf("%w: %w", desktop.ErrUnavailable, err))
		return
	}
	s.sendShot(c, scr, opts, &st)
}

func (s *Server) sendShot(c *gin.Context, scr drive.Screen, opts screenshot.Options, st *screenshot.Settle) {
	shot, err := scr.Capture(c.Request.Context(), opts)
	if err != nil {
		fail(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Screen-Width", strconv.Itoa(shot.Screen.X))
	h.Set("X-Screen-Height", strconv.Itoa(shot.Screen.Y))
	w, hgt := shot.Size()
	h.Set("X-Image-Width", strconv.Itoa(w))
	h.Set("X-Image-Height", strconv.Itoa(hgt))
	r := shot.Region
	h.Set("X-Region", fmt.Sprintf("%d,%d,%d,%d", r.Min.X, r.Min.Y, r.Dx(), r.Dy()))
	h.Set("X-Scale", strconv.FormatFloat(float64(w)/float64(max(r.Dx(), 1)), 'f', 4, 64))
	h.Set("X-Change-Counter", strconv.FormatUint(shot.Counter, 10))
	h.Set("X-Cached", strconv.FormatBool(shot.Cached))
	if st != nil {
		h.Set("X-Settled", strconv.FormatBool(st.Settled))
		h.Set("X-Settle-Ms", strconv.FormatInt(st.Waited.Milliseconds(), 10))
	}
	c.Data(http.StatusOK, shot.ContentType(), shot.Data)
}

// boundParam reads a query parameter of milliseconds within one of the
// drive service's bounds, def when absent; the error names its field.
func boundParam(v string, def time.Duration, b drive.Bound) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, input.Invalid(b.Field, "%q is not a whole number of milliseconds", v)
	}
	return b.Millis(n)
}

func msParam(v string, def, lo, hi time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number of milliseconds", v)
	}
	// Checked before the conversion, which could wrap around.
	if n < lo.Milliseconds() || n > hi.Milliseconds() {
		return 0, fmt.Errorf("%d ms: use %d to %d", n, lo.Milliseconds(), hi.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}

// vncSocket relays RFB over a WebSocket for noVNC. mode=view (the default)
// drops the viewer's input; mode=control passes it, and only while a person
// holds control of the desktop (an agent's control is not shared).
func (s *Server) vncSocket(c *gin.Context) {
	mode := c.DefaultQuery("mode", "view")
	if mode != "view" && mode != "control" {
		badRequest(c, "mode", fmt.Sprintf("mode %q: use view or control", mode))
		return
	}
	if mode == "control" && !mayControl(c) {
		abort(c, http.StatusForbidden, "forbidden", "this token may only watch: ask for a control token", "")
		return
	}
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return
	}
	if mode == "control" && d.Control.Holder != desktop.ControlPerson {
		fail(c, fmt.Errorf("%w: an agent is in control of %s: take control first (POST /v1/desktops/%s/control {\"holder\":\"person\"})", desktop.ErrConflict, id, id))
		return
	}
	scr, ok := s.cfg.Drive.Screen(id)
	if !ok || !d.State.Live() {
		fail(c, &desktop.TransitionError{ID: id, From: d.State, Action: "view"})
		return
	}
	g, _ := grantOf(c)
	release, err := s.viewers.open(id, g.sig)
	if err != nil {
		abort(c, http.StatusTooManyRequests, "too_many_viewers", err.Error(), "")
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	defer s.endOnRevoke(c, cancel)()
	if mode == "control" {
		// Input rights end when the person hands control back.
		stop := s.onControlChange(id, cancel)
		defer stop()
	}
	r := c.Request.WithContext(ctx)
	err = vnc.ServeWebSocket(c.Writer, r, scr.Dial, vnc.ProxyOptions{
		ViewOnly: mode == "view", Logger: s.log.With("desktop", id), Stats: &s.vnc,
		CheckOrigin: sameHost,
	})
	if err != nil && ctx.Err() == nil {
		s.log.Debug("vnc viewer ended", "desktop", id, "err", err)
	}
}

// sameHost accepts WebSocket upgrades from pages served by this host (or
// from non-browser clients, which send no Origin).
func sameHost(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, scheme := range []string{"http://", "https://"} {
		if origin == scheme+r.Host {
			return true
		}
	}
	return false
}
