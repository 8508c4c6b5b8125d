package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// imageOf turns a picture into its JSON form.
func imageOf(pic drive.Picture, quiet time.Duration) *api.Image {
	shot, st := pic.Shot, pic.Settle
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
		if pic.Reacted != nil {
			img.Settle.Reacted, img.Settle.ReactionMs = pic.Reacted, ms(pic.ReactionWait)
			img.Settle.WaitedMs += img.Settle.ReactionMs
		}
	}
	return img
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// response turns an outcome into the JSON answer of a batch; a failed
// batch's error goes into it too.
func response(o drive.Outcome, quiet time.Duration) api.ActionsResponse {
	resp := api.ActionsResponse{
		Results:   make([]api.ActionResult, len(o.Result.Results)),
		QueuedMs:  ms(o.Result.Queued),
		ElapsedMs: ms(o.Result.Elapsed),
		SyncMs:    ms(o.SyncWait),
		Warnings:  o.Notes(),
	}
	for i, r := range o.Result.Results {
		ar := api.ActionResult{Index: r.Index, Action: string(r.Kind), Status: string(r.Status), Error: r.Error, ElapsedMs: ms(r.Elapsed)}
		if r.Cursor != nil {
			ar.Cursor = &api.Point{X: r.Cursor.X, Y: r.Cursor.Y}
		}
		if r.Region != nil {
			ar.Region = []int{r.Region.X1, r.Region.Y1, r.Region.X2, r.Region.Y2}
		}
		if pic, ok := o.Mids[i]; ok {
			ar.Screenshot = imageOf(pic, quiet)
		}
		resp.Results[i] = ar
	}
	if o.Picture != nil {
		resp.Screenshot = imageOf(*o.Picture, quiet)
	}
	if o.Err != nil {
		_, eb := errorOf(o.Err)
		resp.Error = &eb
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
	status, body := answerOf(err)
	if status == http.StatusInternalServerError {
		status, body.Code = http.StatusUnprocessableEntity, "action_failed"
	}
	return status, body
}

// failWith answers an error of the action API with errorOf's status.
func failWith(c *gin.Context, err error) {
	status, body := errorOf(err)
	c.AbortWithStatusJSON(status, api.Error{Error: body})
}

func (s *Server) postActions(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	req, err := decodeBatchRequest(body)
	if err != nil {
		failWith(c, err)
		return
	}
	req.NoUpscale = !isDaemon(c)
	out, err := s.cfg.Drive.Run(c.Request.Context(), c.Param("id"), req)
	if err != nil {
		failWith(c, err)
		return
	}
	resp := response(out, req.Settle)
	if out.Err != nil {
		status, _ := errorOf(out.Err)
		c.AbortWithStatusJSON(status, resp)
		return
	}
	c.JSON(http.StatusOK, resp)
}
