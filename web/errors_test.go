package web

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

// Each domain error keeps its status and code once wrapped.
func TestStatusOfDomainErrors(t *testing.T) {
	for err, want := range map[error]int{
		desktop.ErrNotFound:    http.StatusNotFound,
		desktop.ErrInvalid:     http.StatusBadRequest,
		desktop.ErrCapacity:    http.StatusTooManyRequests,
		desktop.ErrNoSpace:     http.StatusInsufficientStorage,
		desktop.ErrUnavailable: http.StatusGatewayTimeout,
		desktop.ErrConflict:    http.StatusConflict,
	} {
		if got, _ := statusOf(fmt.Errorf("create: %w", err)); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
	if _, code := statusOf(fmt.Errorf("x: %w", desktop.ErrNoSpace)); code != "insufficient_storage" {
		t.Errorf("ErrNoSpace code %q", code)
	}
}
