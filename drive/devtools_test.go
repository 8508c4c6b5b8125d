package drive_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// A desktop of an image without Chromium has no DevTools: a conflict that
// says which images have it, not an unavailable service.
func TestDevToolsOfADesktopWithoutChromium(t *testing.T) {
	h := newHarness(t, drive.Config{})
	_, err := h.svc.DialDevTools(context.Background(), h.id)
	if !errors.Is(err, desktop.ErrConflict) || !strings.Contains(err.Error(), drive.ChromiumFlavor) {
		t.Errorf("DevTools of a minimal desktop: %v, want a conflict naming the %s image", err, drive.ChromiumFlavor)
	}
	if _, err := h.svc.DialDevTools(context.Background(), "d-nosuch"); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("DevTools of no desktop: %v, want not found", err)
	}
}
