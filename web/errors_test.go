package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// Each domain error keeps its status and code once wrapped.
func TestStatusOfDomainErrors(t *testing.T) {
	for err, want := range map[error]int{
		desktop.ErrNotFound:      http.StatusNotFound,
		desktop.ErrInvalid:       http.StatusBadRequest,
		desktop.ErrCapacity:      http.StatusTooManyRequests,
		desktop.ErrNoSpace:       http.StatusInsufficientStorage,
		desktop.ErrUnavailable:   http.StatusGatewayTimeout,
		desktop.ErrConflict:      http.StatusConflict,
		context.DeadlineExceeded: http.StatusGatewayTimeout,
	} {
		if got, _ := statusOf(fmt.Errorf("create: %w", err)); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
	if _, code := statusOf(fmt.Errorf("x: %w", desktop.ErrNoSpace)); code != "insufficient_storage" {
		t.Errorf("ErrNoSpace code %q", code)
	}
}

// A create the host's CPUs had no room for answers 503 cpu_busy with
// Retry-After and the measured pressure.
func TestBusyAnswers503WithRetryAfter(t *testing.T) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	err := fmt.Errorf("create: %w", &desktop.BusyError{Action: "create", Pressure: 0.93, Bound: 0.9, Waited: time.Minute, Queued: 3, RetryAfter: 5 * time.Second})
	fail(c, err)
	var body api.Error
	if jerr := json.Unmarshal(w.Body.Bytes(), &body); jerr != nil {
		t.Fatal(jerr)
	}
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" || body.Error.Code != "cpu_busy" || body.Error.CPUPressure != 0.93 ||
		!strings.Contains(body.Error.Message, "CPU pressure is 93%, above the bound of 90%") {
		t.Errorf("%d %v %+v", w.Code, w.Header(), body)
	}
}

// An internal deadline never reaches a caller as "context deadline
// exceeded": the answer says which step ran out of time and why.
func TestDeadlineAnswersWhatRanOutOfTime(t *testing.T) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	fail(c, fmt.Errorf("read the clipboard of d-1: %w", context.DeadlineExceeded))
	var body api.Error
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusGatewayTimeout || body.Error.Code != "unavailable" || strings.Contains(body.Error.Message, "context deadline exceeded") ||
		!strings.HasPrefix(body.Error.Message, "read the clipboard of d-1: ran out of time: the desktop or the host was too slow") {
		t.Errorf("%d %+v", w.Code, body)
	}
}
