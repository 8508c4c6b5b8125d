package web

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// target is a desktop that may take agent input now.
type target struct {
	acts   Actions
	id     string
	d      desktop.Desktop
	runner *input.Runner
	native image.Point
}

// inputTarget checks that the desktop exists, runs, and is in an agent's
// control, and finds its runner. The device behind the runner checks the
// last two again on every frame; this check only answers early and
// clearly.
func (s *Server) inputTarget(id string) (target, error) {
	if s.cfg.Actions == nil {
		return target{}, fmt.Errorf("%w: this hostd has no action API wired", desktop.ErrUnavailable)
	}
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		return target{}, err
	}
	if err := InputAllowed(d); err != nil {
		return target{}, err
	}
	r, err := s.cfg.Actions.Runner(id)
	if err != nil {
		return target{}, err
	}
	w, h, err := s.cfg.Actions.ScreenSize(id)
	if err != nil {
		return target{}, err
	}
	return target{acts: s.cfg.Actions, id: id, d: d, runner: r, native: image.Pt(w, h)}, nil
}

// InputAllowed says why a desktop may not take agent input, or nil: it
// must be running (not paused, hibernated or failed) and no person may be
// in control. hostd/app's device applies the same rule to every frame.
func InputAllowed(d desktop.Desktop) error {
	if d.State != desktop.StateRunning {
		return &desktop.TransitionError{ID: d.ID, From: d.State, Action: "send input to"}
	}
	if d.Control.Holder == desktop.ControlPerson {
		by := d.Control.By
		if by == "" {
			by = "someone"
		}
		return fmt.Errorf("%w: %s took control of desktop %s at %s; agent input is refused until they hand it back (POST /v1/desktops/%s/control {\"holder\":\"agent\"})",
			desktop.ErrControlled, by, d.ID, d.Control.Since.Format(time.RFC3339), d.ID)
	}
	return nil
}

// runSpec is a batch to run and how to picture its end.
type runSpec struct {
	batch input.Batch
	// display is the declared coordinate space; zero means native.
	display image.Point
	// screenshot asks for a trailing screenshot whatever the last action.
	screenshot bool
	settle     time.Duration
	timeout    time.Duration
	format     screenshot.Format
	quality    int
	cursor     bool
	// midShots captures screenshot and zoom actions that are not last.
	midShots bool
}

// runOutcome is what a batch did.
type runOutcome struct {
	res   input.BatchResult
	space input.Space
	// err is the batch's failure; res still reports every action.
	err  error
	shot *screenshot.Shot
	// settle is the wait before shot, when there was one.
	settle *screenshot.Settle
	mids   map[int]*api.Image
}

// space is the batch's coordinate space.
func (t target) space(display image.Point) input.Space {
	if display == (image.Point{}) {
		return screenshot.Identity(t.native.X, t.native.Y)
	}
	return screenshot.ScaleTo(t.native.X, t.native.Y, display.X, display.Y)
}

// run validates a batch (nothing is sent when it fails), makes sure a
// screen is there to picture it if a picture is wanted, runs it, then waits
// for the screen to settle and captures it. The returned error is a failure
// before anything ran; a failure of the batch itself is in the outcome.
func (s *Server) run(ctx context.Context, t target, spec runSpec) (runOutcome, error) {
	out := runOutcome{space: t.space(spec.display)}
	if err := t.runner.Validate(spec.batch, out.space); err != nil {
		return out, err
	}
	last := spec.batch[len(spec.batch)-1].Kind
	var scr Screen
	if spec.screenshot || last == input.KindScreenshot || last == input.KindZoom || (spec.midShots && hasShot(spec.batch)) {
		var err error
		if scr, err = s.readyScreen(ctx, t.id); err != nil {
			return out, err
		}
	}
	if hasKind(spec.batch, input.KindCursorPosition) {
		if _, ok := t.runner.Position(); !ok {
			// Best effort: without it cursor_position reports its own
			// error, which is what the agent should see then.
			if err := t.acts.LocatePointer(ctx, t.id); err != nil {
				s.log.Debug("locate pointer", "desktop", t.id, "err", err)
			}
		}
	}
	opts := input.RunOptions{Space: out.space, Screenshot: spec.screenshot}
	if spec.midShots && scr != nil {
		out.mids = map[int]*api.Image{}
		opts.Capture = func(ctx context.Context, index int, region *input.Rect) error {
			shot, st, err := s.settleAndCapture(ctx, t, scr, spec, out.space, region)
			if err != nil {
				return err
			}
			out.mids[index] = imageOf(shot, st, spec.settle)
			return nil
		}
	}
	out.res, out.err = t.runner.Run(ctx, spec.batch, opts)
	s.cfg.Manager.Touch(t.id)
	s.cfg.Manager.Announce(t.id, desktop.EventAction, summarize(spec.batch, out.err))
	if out.err != nil || !out.res.Screenshot {
		return out, nil
	}
	shot, st, err := s.settleAndCapture(ctx, t, scr, spec, out.space, out.res.Zoom)
	if err != nil {
		out.err = fmt.Errorf("trailing screenshot: %w", err)
		return out, nil
	}
	out.shot, out.settle = &shot, st
	return out, nil
}

// readyScreen finds a desktop's screen once its mirror holds a frame.
func (s *Server) readyScreen(ctx context.Context, id string) (Screen, error) {
	scr, ok := s.cfg.Screens.Screen(id)
	if !ok {
		return nil, fmt.Errorf("%w: desktop %s has no screen yet", desktop.ErrUnavailable, id)
	}
	ctx, cancel := context.WithTimeout(ctx, firstFrameWait)
	defer cancel()
	select {
	case <-scr.Ready():
		return scr, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: desktop %s: no picture from its VNC server within %s", desktop.ErrUnavailable, id, firstFrameWait)
	}
}

// settleAndCapture waits for the screen to stay unchanged for the quiet
// period (or the deadline), then captures it, or the zoom region.
func (s *Server) settleAndCapture(ctx context.Context, t target, scr Screen, spec runSpec, space input.Space, zoom *input.Rect) (screenshot.Shot, *screenshot.Settle, error) {
	var st *screenshot.Settle
	if spec.settle > 0 && spec.timeout > 0 {
		got, err := screenshot.WaitSettled(ctx, scr.Source(), spec.settle, spec.timeout)
		if err != nil {
			return screenshot.Shot{}, nil, fmt.Errorf("wait for the screen to settle: %w", err)
		}
		st = &got
	}
	o := screenshot.Options{Format: spec.format, Quality: spec.quality}
	w, h := space.Size()
	if zoom != nil {
		o.Region = image.Rect(zoom.X1, zoom.Y1, zoom.X2, zoom.Y2)
		o.Width, o.Height = fitInside(o.Region.Dx(), o.Region.Dy(), w, h)
	} else if spec.display != (image.Point{}) {
		o.Width, o.Height = w, h
	}
	if p, ok := t.runner.Position(); ok && spec.cursor {
		o.Cursor, o.Pointer = true, image.Pt(p.X, p.Y)
	}
	shot, err := scr.Capture(ctx, o)
	if err != nil {
		return screenshot.Shot{}, st, fmt.Errorf("capture the screen: %w", err)
	}
	return shot, st, nil
}

// fitInside scales a w x h region up or down to the largest size that fits
// in maxW x maxH with the same aspect ratio: a zoom shows its region as
// large as the display the agent sees.
func fitInside(w, h, maxW, maxH int) (int, int) {
	if w <= 0 || h <= 0 {
		return maxW, maxH
	}
	f := math.Min(float64(maxW)/float64(w), float64(maxH)/float64(h))
	return max(1, int(math.Round(float64(w)*f))), max(1, int(math.Round(float64(h)*f)))
}

func hasKind(b input.Batch, k input.Kind) bool {
	for _, a := range b {
		if a.Kind == k {
			return true
		}
	}
	return false
}

func hasShot(b input.Batch) bool {
	return hasKind(b, input.KindScreenshot) || hasKind(b, input.KindZoom)
}

// imageOf turns a shot into its JSON form.
func imageOf(shot screenshot.Shot, st *screenshot.Settle, quiet time.Duration) *api.Image {
	w, h := shot.Size()
	r := shot.Region
	img := &api.Image{
		MediaType: shot.ContentType(), Data: shot.Data, Width: w, Height: h,
		ScreenWidth: shot.Screen.X, ScreenHeight: shot.Screen.Y,
		Region:  []int{r.Min.X, r.Min.Y, r.Dx(), r.Dy()},
		Counter: shot.Counter, CaptureMs: ms(shot.EncodeTime),
	}
	if shot.Cached {
		img.CaptureMs = 0
	}
	if st != nil {
		img.Settle = &api.Settle{Settled: st.Settled, WaitedMs: ms(st.Waited), QuietMs: int(quiet.Milliseconds()), Changes: st.Changes}
	}
	return img
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// response turns an outcome into the JSON answer of a batch.
func (o runOutcome) response(quiet time.Duration) api.ActionsResponse {
	resp := api.ActionsResponse{
		Results:   make([]api.ActionResult, len(o.res.Results)),
		QueuedMs:  ms(o.res.Queued),
		ElapsedMs: ms(o.res.Elapsed),
	}
	for i, r := range o.res.Results {
		ar := api.ActionResult{Index: r.Index, Action: string(r.Kind), Status: string(r.Status), Error: r.Error, ElapsedMs: ms(r.Elapsed)}
		if r.Cursor != nil {
			ar.Cursor = &api.Point{X: r.Cursor.X, Y: r.Cursor.Y}
		}
		if r.Region != nil {
			ar.Region = []int{r.Region.X1, r.Region.Y1, r.Region.X2, r.Region.Y2}
		}
		ar.Screenshot = o.mids[i]
		resp.Results[i] = ar
	}
	if o.shot != nil {
		resp.Screenshot = imageOf(*o.shot, o.settle, quiet)
	}
	return resp
}

// errorOf maps an error of the action API to a status and a body. Domain
// errors map as everywhere (statusOf); validation errors are 400 naming
// the field; an action that failed for a reason of its own (a cursor
// position nobody knows yet) is 422.
func errorOf(err error) (int, api.ErrorBody) {
	var ve *input.ValidationError
	if errors.As(err, &ve) {
		return http.StatusBadRequest, api.ErrorBody{Code: "invalid", Message: err.Error(), Field: ve.Field}
	}
	if errors.Is(err, input.ErrInvalid) {
		return http.StatusBadRequest, api.ErrorBody{Code: "invalid", Message: err.Error()}
	}
	status, code := statusOf(err)
	body := api.ErrorBody{Code: code, Message: err.Error()}
	var te *desktop.TransitionError
	if errors.As(err, &te) {
		body.State = string(te.From)
	}
	if status == http.StatusInternalServerError {
		status, body.Code = http.StatusUnprocessableEntity, "action_failed"
	}
	return status, body
}

// failWith answers an error of the action API with errorOf's status; extra,
// when not nil, is the body to send with the error filled in.
func failWith(c *gin.Context, err error) {
	status, body := errorOf(err)
	c.AbortWithStatusJSON(status, api.Error{Error: body})
}

func (s *Server) postActions(c *gin.Context) {
	if !mayDrive(c) {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	req, err := decodeBatchRequest(body)
	if err != nil {
		failWith(c, err)
		return
	}
	t, err := s.inputTarget(c.Param("id"))
	if err != nil {
		failWith(c, err)
		return
	}
	out, err := s.run(c.Request.Context(), t, req.spec())
	if err != nil {
		failWith(c, err)
		return
	}
	resp := out.response(req.settle)
	if out.err != nil {
		status, eb := errorOf(out.err)
		resp.Error = &eb
		c.AbortWithStatusJSON(status, resp)
		return
	}
	c.JSON(http.StatusOK, resp)
}

func (r batchRequest) spec() runSpec {
	return runSpec{
		batch: r.batch, display: r.display, screenshot: r.screenshot, settle: r.settle, timeout: r.timeout,
		format: r.format, quality: r.quality, cursor: r.cursor, midShots: true,
	}
}
