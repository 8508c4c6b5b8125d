package recording

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

func TestActionLogKeepsTimeOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	l := actionLog{start: start}
	// Told out of order, as events from several goroutines are.
	l.add(start.Add(300*time.Millisecond), "exec", "c")
	l.add(start.Add(100*time.Millisecond), "action", "a")
	l.add(start.Add(200*time.Millisecond), "control", "b")
	l.add(start.Add(200*time.Millisecond), "control", "b2") // same time: after the earlier told
	var got []string
	for _, e := range l.entries {
		got = append(got, fmt.Sprintf("%s@%.0f", e.Summary, e.AtMs))
	}
	if strings.Join(got, " ") != "a@100 b@200 b2@200 c@300" {
		t.Errorf("log %v", got)
	}
}

func TestConcatListShowsEachFrameUntilTheNext(t *testing.T) {
	got := concatList([]frame{{"frame-000001.jpg", 0}, {"frame-000002.jpg", 1500 * time.Millisecond}, {"frame-000003.jpg", 1600 * time.Millisecond}}, 20*time.Second)
	want, err := os.ReadFile("testdata/frames.ffconcat")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("concat list:\n%s\nwant:\n%s", got, want)
	}
	// A first frame seen late still starts the video at the recording's
	// start: the video is as long as the recording.
	late := concatList([]frame{{"a.jpg", 80 * time.Millisecond}, {"b.jpg", 200 * time.Millisecond}}, 300*time.Millisecond)
	if !strings.Contains(late, "file 'a.jpg'\noption framerate 1000\nduration 0.200\n") || !strings.Contains(late, "duration 0.100\n") {
		t.Errorf("late first frame:\n%s", late)
	}
}

func TestFFmpegArgs(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{FormatMP4, "-c:v libx264 -preset veryfast -crf 28 -movflags +faststart -f mp4 OUT"},
		{FormatWebM, "-c:v libvpx -deadline realtime -cpu-used 8 -b:v 1M -f webm OUT"},
	} {
		got := strings.Join(ffmpegArgs("LIST", "OUT", tc.format), " ")
		head := "-hide_banner -loglevel error -nostdin -y -f concat -safe 0 -i LIST -fps_mode vfr -vf pad=ceil(iw/2)*2:ceil(ih/2)*2 -pix_fmt yuv420p "
		if got != head+tc.want {
			t.Errorf("%s: %s", tc.format, got)
		}
	}
	if err := CheckFormat("gif"); err == nil || !strings.Contains(err.Error(), "mp4") {
		t.Errorf("gif accepted: %v", err)
	}
}

func TestLogLines(t *testing.T) {
	d := desktop.Desktop{ID: "d-1", Snapshot: "browser", State: desktop.StateRunning, Control: desktop.Control{Holder: desktop.ControlPerson, By: "ana"}}
	for _, tc := range []struct {
		ev       desktop.Event
		kind, in string
	}{
		{desktop.Event{Type: desktop.EventAction, Summary: "click (10,20)"}, "action", "click (10,20)"},
		{desktop.Event{Type: desktop.EventExec, Summary: "/bin/ls: exit 0"}, "exec", "/bin/ls"},
		{desktop.Event{Type: desktop.EventControl, Desktop: d}, "control", "ana took control"},
		{desktop.Event{Type: desktop.EventReset, Desktop: d}, "reset", "browser"},
		{desktop.Event{Type: desktop.EventDevTools, Summary: "a DevTools client connected to /devtools/browser/x"}, "devtools", "connected"},
	} {
		kind, summary, ok := LogLine(tc.ev)
		if !ok || kind != tc.kind || !strings.Contains(summary, tc.in) {
			t.Errorf("%s: %q %q %v", tc.ev.Type, kind, summary, ok)
		}
	}
	if _, _, ok := LogLine(desktop.Event{Type: desktop.EventNetwork}); ok {
		t.Error("network events are not in the action log")
	}
}

// A recording of a screen that changes a few times is a video ffprobe
// reads, as long as the recording, with its frames; the frames are gone
// once it is encoded.
func TestRecorderEncodesWhatChanged(t *testing.T) {
	for _, format := range []string{FormatMP4, FormatWebM} {
		t.Run(format, func(t *testing.T) {
			src := screenshottest.NewSource(screenshottest.DesktopFrame(320, 200, 1))
			dir := filepath.Join(t.TempDir(), "rec")
			var ended []Info
			r, err := Start(context.Background(), dir, "rec-1", "d-1", src, Options{Format: format, MinInterval: 10 * time.Millisecond}, nil,
				func(in Info) { ended = append(ended, in) })
			if err != nil {
				t.Fatal(err)
			}
			waitFrames(t, r, 1)
			for i := range 3 {
				src.Fill(image.Rect(10*i, 10, 10*i+40, 60), image.NewUniform(color.RGBA{uint8(80 * i), 200, 40, 255}))
				waitFrames(t, r, i+2)
			}
			r.Note(time.Now(), "action", "painted")
			in, err := r.Stop(context.Background(), "stopped")
			if err != nil || in.State != StateDone || in.Frames != 4 || in.Reason != "stopped" {
				t.Fatalf("stop: %+v %v", in, err)
			}
			if len(ended) != 1 || ended[0].State != StateEncoding {
				t.Errorf("ended heard %+v, want once, as encoding began", ended)
			}
			video, ok := r.Video()
			if !ok || filepath.Ext(video) != "."+format {
				t.Fatalf("video %q %v", video, ok)
			}
			dur, frames := testenv.ProbeVideo(t, video)
			if dur < in.Seconds*0.9 || dur > in.Seconds*1.1+0.1 {
				t.Errorf("video of %.3f s for a recording of %.3f s", dur, in.Seconds)
			}
			if frames < 4 {
				t.Errorf("%d frames in the video, want the 4 captured at least", frames)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "frame-*.jpg")); len(left) != 0 {
				t.Errorf("frames left after encoding: %v", left)
			}
			if a := r.Actions(); len(a) != 1 || a[0].Summary != "painted" || a[0].AtMs <= 0 {
				t.Errorf("actions %+v", a)
			}
			if err := r.Remove(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the recording's directory is still there: %v", err)
			}
		})
	}
}

// The disk cap ends a recording, which keeps (and encodes) what it has.
func TestRecorderStopsAtItsDiskCap(t *testing.T) {
	src := screenshottest.NewSource(screenshottest.DesktopFrame(320, 200, 1))
	r, err := Start(context.Background(), filepath.Join(t.TempDir(), "rec"), "rec-1", "d-1", src, Options{MaxBytes: 1, MinInterval: time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatal("a recording over its cap did not end")
	}
	in := r.Info()
	if !strings.Contains(in.Reason, "disk cap") || in.State != StateFailed || in.Frames != 0 {
		t.Errorf("over the cap: %+v", in)
	}
}

func TestNoFFmpegIsAClearError(t *testing.T) {
	src := screenshottest.NewSource(screenshottest.DesktopFrame(32, 32, 1))
	_, err := Start(context.Background(), filepath.Join(t.TempDir(), "rec"), "rec-1", "d-1", src, Options{FFmpeg: "/nonexistent/ffmpeg"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "apt-get install ffmpeg") {
		t.Errorf("without ffmpeg: %v", err)
	}
}

func waitFrames(t *testing.T, r *Recorder, n int) {
	t.Helper()
	if !testenv.Poll(10*time.Second, time.Millisecond, 20*time.Millisecond, func() bool { return r.Info().Frames >= n }) {
		t.Fatalf("%d frames after 10 s, want %d", r.Info().Frames, n)
	}
}

// A discarded recording is not encoded, and its files go.
func TestDiscardSkipsTheEncoding(t *testing.T) {
	src := screenshottest.NewSource(screenshottest.DesktopFrame(320, 200, 1))
	dir := filepath.Join(t.TempDir(), "rec")
	r, err := Start(context.Background(), dir, "rec-1", "d-1", src, Options{MinInterval: time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFrames(t, r, 1)
	r.Discard()
	if err := r.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in := r.Info(); in.State != StateFailed || in.VideoBytes != 0 || !strings.Contains(in.Error, "deleted") {
		t.Errorf("discarded: %+v", in)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("files left: %v", err)
	}
}

// A disk that fills during a recording ends it with the reason, keeping the
// frames it had (and encoding them when the video still fits).
func TestFullDiskEndsARecordingKeepingItsFrames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=160k"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	src := screenshottest.NewSource(screenshottest.DesktopFrame(320, 200, 1))
	r, err := Start(context.Background(), filepath.Join(dir, "rec"), "rec-1", "d-1", src, Options{MinInterval: time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		select {
		case <-r.done:
		default:
			src.SetFrame(screenshottest.DesktopFrame(320, 200, uint64(i+2)))
			waitFrames(t, r, 1)
			continue
		}
		break
	}
	in := r.Info()
	if !strings.Contains(in.Reason, "disk is full") || in.Frames < 2 {
		t.Fatalf("after the disk filled: %+v", in)
	}
	t.Logf("%d frames kept (%d bytes); state %s %s", in.Frames, in.FrameBytes, in.State, in.Error)
	if in.State == StateFailed && !strings.Contains(strings.ToLower(in.Error), "no space left") {
		t.Errorf("failed for another reason than the video (or its frame list) not fitting: %s", in.Error)
	}
	if in.State == StateFailed {
		left, _ := filepath.Glob(filepath.Join(dir, "rec", "frame-*.jpg"))
		if len(left) != in.Frames {
			t.Errorf("%d frame files kept, want %d", len(left), in.Frames)
		}
	}
}
