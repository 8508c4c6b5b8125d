package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/recording"
)

// recordingWindow is how long each CPU window of the recording cost lasts.
const recordingWindow = 8 * time.Second

// recordingKeys are the figures of recordingCost.
var recordingKeys = []string{"rec_idle_cpu_pct", "rec_typing_cpu_pct", "rec_typing_frames_per_s", "rec_encode_cpu_s_per_min"}

// recordingCost measures what recording a desktop costs the host: hostd's
// own CPU (the mirror, the JPEG of each changed picture) over windows of an
// idle screen and of an agent typing, each without and with a recording,
// back to back so the host's swings hit both alike; and ffmpeg's CPU to
// encode a minute of the typing. post sends a batch to the desktop.
func (e *env) recordingCost(ctx context.Context, id string, post func(string) error) error {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		for _, k := range recordingKeys {
			e.res.null(k, "ffmpeg is not installed, so nothing is recorded")
		}
		return nil
	}
	scr, ok := e.screens.Get(id)
	if !ok {
		return fmt.Errorf("desktop %s has no screen", id)
	}
	reg := recording.NewRegistry(filepath.Join(e.runDir, "recordings"), recording.Options{}, e.log, nil)
	typing := func(until time.Time) error {
		for time.Now().Before(until) {
			if err := post(`{"actions":[{"action":"type","text":"echo warmdesk records this line\n"}]}`); err != nil {
				return err
			}
		}
		return nil
	}
	window := func(record, typed bool) (pct float64, in recording.Info, err error) {
		var r *recording.Recorder
		if record {
			started, err := reg.Start(ctx, id, scr.Source(), "")
			if err != nil {
				return 0, in, err
			}
			if r, err = reg.Get(id, started.ID); err != nil {
				return 0, in, err
			}
		}
		cpu0, t0 := selfCPU(), time.Now()
		if typed {
			err = typing(t0.Add(recordingWindow))
		} else {
			// An idle screen's cost is what the window measures.
			<-time.After(recordingWindow)
		}
		pct = 100 * (selfCPU() - cpu0).Seconds() / time.Since(t0).Seconds()
		if r != nil {
			in, _ = r.Stop(ctx, "stopped")
			reg.Remove(context.WithoutCancel(ctx), id, in.ID)
		}
		return pct, in, err
	}
	idle0, _, err := window(false, false)
	if err != nil {
		return err
	}
	idle1, _, err := window(true, false)
	if err != nil {
		return err
	}
	type0, _, err := window(false, true)
	if err != nil {
		return err
	}
	type1, rec, err := window(true, true)
	if err != nil {
		return err
	}
	if rec.State != recording.StateDone {
		return fmt.Errorf("the typing's recording was not encoded: %s", rec.Error)
	}
	e.res.set("rec_idle_cpu_pct", idle1-idle0)
	e.res.set("rec_typing_cpu_pct", type1-type0)
	e.res.set("rec_typing_frames_per_s", float64(rec.Frames)/rec.Seconds)
	e.res.set("rec_encode_cpu_s_per_min", rec.EncodeCPUSeconds*60/rec.Seconds)
	e.res.note(fmt.Sprintf("rec_*: hostd's CPU in %% of one core, %s windows: idle %.1f%% without a recording and %.1f%% with; typing %.1f%% and %.1f%%",
		recordingWindow, idle0, idle1, type0, type1))
	e.progress("  recording: +%.1f%% CPU idle, +%.1f%% typing (%.1f frames/s); encoding %.1f CPU s per minute",
		idle1-idle0, type1-type0, float64(rec.Frames)/rec.Seconds, rec.EncodeCPUSeconds*60/rec.Seconds)
	return nil
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
