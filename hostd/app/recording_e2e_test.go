package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A 20 s recording of a desktop while an agent types is a video ffprobe
// reads as 20 s long (within 10 %), made of more than one picture, and its
// action log lists the batch at its time in the recording.
func TestRecordingOfATypingBatch(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "minimal")
	h := openHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	defer h.c.DeleteDesktop(context.WithoutCancel(ctx), d.ID)
	rec, err := h.c.StartRecording(ctx, d.ID, api.StartRecording{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	typed := "echo recorded by warmdesk; seq 1 40"
	if _, err := h.c.Actions(ctx, d.ID, api.ActionsRequest{Actions: input.Batch{
		{Kind: input.KindClick, At: &input.Point{X: 300, Y: 200}},
		{Kind: input.KindType, Text: typed + "\n"},
	}}); err != nil {
		t.Fatalf("typing batch: %v", err)
	}
	if list, err := h.c.Recordings(ctx, d.ID); err != nil || len(list) != 1 || list[0].State != "recording" {
		t.Fatalf("recordings while recording: %+v %v", list, err)
	}
	// The recording's length is what is tested: it runs 20 s.
	<-time.After(time.Until(start.Add(20 * time.Second)))
	rec, err = h.c.StopRecording(ctx, d.ID, rec.ID)
	if err != nil || rec.State != "done" {
		t.Fatalf("stop: %+v %v", rec, err)
	}
	t.Logf("recording: %.1f s, %d frames (%d KiB of JPEG), video %d KiB", rec.Seconds, rec.Frames, rec.FrameBytes>>10, rec.VideoBytes>>10)
	if rec.Frames < 2 {
		t.Errorf("%d frames: the typing changed the screen, want more than one picture", rec.Frames)
	}
	path := filepath.Join(t.TempDir(), "rec.mp4")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.c.DownloadRecording(ctx, d.ID, rec.ID, f)
	f.Close()
	if err != nil || n != rec.VideoBytes {
		t.Fatalf("download: %d bytes of %d, %v", n, rec.VideoBytes, err)
	}
	seconds, frames := testenv.ProbeVideo(t, path)
	if seconds < 18 || seconds > 22 {
		t.Errorf("ffprobe reads %.2f s, want 20 s within 10 %%", seconds)
	}
	if frames < rec.Frames {
		t.Errorf("ffprobe reads %d frames, fewer than the %d recorded", frames, rec.Frames)
	}
	actions, err := h.c.RecordingActions(ctx, d.ID, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	var batch *api.RecordingEntry
	for i, a := range actions.Actions {
		if a.Kind == "action" && strings.Contains(a.Summary, "type") {
			batch = &actions.Actions[i]
		}
	}
	if batch == nil || batch.AtMs <= 0 || batch.AtMs > 20000 {
		t.Errorf("action log %+v: want the typing batch within the recording", actions.Actions)
	}
}
