package drive_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
)

// slowSetUp is a desktop whose on_create command holds its guest's set-up
// until release is closed.
func slowSetUp(t *testing.T) (svc *drive.Service, id string, release chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr, _, guest := drivetest.NewManager(t, "hold the set-up")
	release = make(chan struct{})
	guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		if strings.Join(c.Args, " ") == "-c hold the set-up" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return desktoptest.GuestResult{Stdout: []byte("ran " + c.Path)}, nil
	}
	d, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: "snap"})
	if err != nil {
		t.Fatal(err)
	}
	return drive.New(ctx, drive.Config{Manager: mgr, Screens: &drivetest.Screens{Default: drivetest.NewScreen(1280, 800)}}), d.ID, release
}

// A guest call right after a create waits for the guest's set-up within
// the caller's deadline, not within the program's own timeout (an MCP
// windows call right after create_desktop failed with "still starting:
// context deadline exceeded" when the set-up outlasted the helper's few
// seconds); and a caller whose deadline ends first hears why.
func TestGuestCallsWaitForTheSetUpWithinTheCallersDeadline(t *testing.T) {
	svc, id, release := slowSetUp(t)

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := svc.Exec(short, id, drive.ExecRequest{Path: "true", Timeout: 100 * time.Millisecond})
	if !errors.Is(err, desktop.ErrUnavailable) || !strings.Contains(err.Error(), "still being set up") ||
		strings.HasSuffix(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("a caller out of time while the guest is set up: %v", err)
	}

	// The set-up ends after the program's timeout and the agent's margin
	// (3 s) would have: the call still answers.
	held := time.AfterFunc(3500*time.Millisecond, func() { close(release) })
	defer held.Stop()
	start := time.Now()
	res, err := svc.Exec(context.Background(), id, drive.ExecRequest{Path: "true", Timeout: 100 * time.Millisecond})
	if err != nil || string(res.Stdout) != "ran true" {
		t.Fatalf("exec after a set-up of %s: %+v %v", time.Since(start), res, err)
	}
	if waited := time.Since(start); waited < 3*time.Second {
		t.Fatalf("exec answered after %s, before the set-up ended", waited)
	}
}
