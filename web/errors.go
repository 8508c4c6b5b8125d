package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/volume"
)

// statusOf maps a domain error to an HTTP status and a stable code. This is
// the only place that knows HTTP statuses for domain errors.
func statusOf(err error) (int, string) {
	var te *desktop.TransitionError
	switch {
	case errors.As(err, &te):
		return http.StatusConflict, "illegal_state"
	case errors.Is(err, desktop.ErrNotFound), errors.Is(err, volume.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, desktop.ErrInvalid), errors.Is(err, volume.ErrInvalid), errors.Is(err, input.ErrInvalid):
		// input's errors name no domain error of their own.
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, desktop.ErrControlled):
		return http.StatusConflict, "person_in_control"
	case errors.Is(err, input.ErrUnconfirmed):
		return http.StatusConflict, "confirmation_required"
	case errors.Is(err, desktop.ErrConflict), errors.Is(err, volume.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, volume.ErrDamaged):
		return http.StatusConflict, "volume_damaged"
	case errors.Is(err, desktop.ErrCapacity):
		return http.StatusTooManyRequests, "over_capacity"
	case errors.Is(err, desktop.ErrBusy):
		return http.StatusServiceUnavailable, "cpu_busy"
	case errors.Is(err, desktop.ErrNoSpace):
		return http.StatusInsufficientStorage, "insufficient_storage"
	case errors.Is(err, desktop.ErrMismatch):
		return http.StatusConflict, "snapshot_mismatch"
	case errors.Is(err, desktop.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "unavailable"
	default:
		return http.StatusInternalServerError, "internal"
	}
}

// fail answers with the error's status and a JSON body saying what was
// wrong (answerOf); a refusal for CPU says when to try again.
func fail(c *gin.Context, err error) {
	status, body := answerOf(err)
	var be *desktop.BusyError
	if errors.As(err, &be) {
		c.Header("Retry-After", strconv.Itoa(be.RetryAfterSeconds()))
	}
	c.AbortWithStatusJSON(status, api.Error{Error: body})
}

// answerOf is a domain error's status (statusOf) and body: for a desktop
// in the wrong state it names the state, for a bad value the field, for a
// refusal for CPU the pressure measured.
func answerOf(err error) (int, api.ErrorBody) {
	status, code := statusOf(err)
	body := api.ErrorBody{Code: code, Message: deadlineSaid(err)}
	var te *desktop.TransitionError
	if errors.As(err, &te) {
		body.State = string(te.From)
	}
	var fe interface{ FieldName() string }
	if errors.As(err, &fe) {
		body.Field = fe.FieldName()
	}
	var be *desktop.BusyError
	if errors.As(err, &be) {
		body.CPUPressure = be.Pressure
	}
	return status, body
}

// deadlineSaid is err's text, with a deadline's "context deadline
// exceeded" said as what it means to a caller: the step named before it
// ran out of time because the desktop or the host was slow.
func deadlineSaid(err error) string {
	msg := err.Error()
	if !errors.Is(err, context.DeadlineExceeded) {
		return msg
	}
	return strings.ReplaceAll(msg, context.DeadlineExceeded.Error(),
		"ran out of time: the desktop or the host was too slow to answer (hostd status shows the host's CPU pressure); try again, or with a longer timeout_ms where the call takes one")
}

// abort answers with an explicit status.
func abort(c *gin.Context, status int, code, message, field string) {
	c.AbortWithStatusJSON(status, api.Error{Error: api.ErrorBody{Code: code, Message: message, Field: field}})
}

// badRequest answers 400 naming the field at fault.
func badRequest(c *gin.Context, field, message string) {
	abort(c, http.StatusBadRequest, "invalid", message, field)
}
