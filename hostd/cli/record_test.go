package cli_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/hostd/cli"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/recording"
	"github.com/warmdesk/warmdesk/web"
)

// `hostd desktop record` records for a while, saves the video and removes
// the recording from the host; `hostd desktop reset` resets.
func TestRecordAndResetCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := drivetest.NewDesktop(t)
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	reg := recording.NewRegistry(t.TempDir(), recording.Options{}, nil, nil)
	const token = "wd_cli_test"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: token, Recordings: reg}).Handler())
	t.Cleanup(hs.Close)
	t.Setenv("WARMDESK_ADDR", hs.URL)
	t.Setenv("WARMDESK_TOKEN", token)

	out := filepath.Join(t.TempDir(), "run.mp4")
	var stdout, stderr bytes.Buffer
	if code := cli.Main(ctx, []string{"desktop", "record", "--for", "300ms", "-o", out, f.ID}, &stdout, &stderr); code != 0 {
		t.Fatalf("record: exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	secs, _ := testenv.ProbeVideo(t, out)
	if secs < 0.25 || secs > 1 {
		t.Errorf("a 300 ms recording is %.2f s long", secs)
	}
	if !strings.Contains(stdout.String(), out) || len(reg.List(f.ID)) != 0 {
		t.Errorf("record printed %q and left %d recordings on the host", stdout.String(), len(reg.List(f.ID)))
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}

	stdout.Reset()
	if code := cli.Main(ctx, []string{"desktop", "reset", "--clock", "2031-01-01T00:00:00Z", f.ID}, &stdout, &stderr); code != 0 {
		t.Fatalf("reset: exit %d: %s", code, stderr.String())
	}
	if d, _ := f.Manager.Get(f.ID); d.Resets != 1 || d.Clock == nil || d.Clock.Year() != 2031 {
		t.Errorf("after hostd desktop reset: resets %d, clock %v", d.Resets, d.Clock)
	}
	if code := cli.Main(ctx, []string{"desktop", "reset", "--clock", "soon", f.ID}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "RFC 3339") {
		t.Errorf("--clock soon: exit %d: %s", code, stderr.String())
	}
}
