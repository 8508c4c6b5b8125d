package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/warmdesk/warmdesk/api"
)

// desktopRecord records a desktop's screen for a while (or until Ctrl-C),
// then saves the video and prints where its action log is.
func desktopRecord(ctx context.Context, e *env, args []string) error {
	var (
		req  api.StartRecording
		dur  time.Duration
		out  string
		keep bool
	)
	pos, c, err := connect(e, "record", args, func(fs *flagSet) {
		fs.StringVar(&req.Format, "format", "mp4", "mp4 (H.264) or webm (VP8)")
		fs.DurationVar(&dur, "for", 0, "record this long (0: until Ctrl-C)")
		fs.StringVar(&out, "o", "", "write the video to this file (default: ID-RECORDING.FORMAT)")
		fs.BoolVar(&keep, "keep", false, "keep the recording on the host after saving it")
	})
	if err != nil {
		return err
	}
	id, err := oneID(pos)
	if err != nil {
		return err
	}
	rec, err := c.StartRecording(ctx, id, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "recording %s of %s: ", rec.ID, id)
	if dur > 0 {
		fmt.Fprintf(e.stderr, "%s\n", dur)
		select {
		case <-time.After(dur):
		case <-ctx.Done():
		}
	} else {
		fmt.Fprintln(e.stderr, "Ctrl-C stops it")
		<-ctx.Done()
	}
	// Stopping and saving happen after a Ctrl-C too.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	rec, err = c.StopRecording(sctx, id, rec.ID)
	if err != nil {
		return err
	}
	if rec.State != "done" {
		return fmt.Errorf("recording %s was not encoded: %s", rec.ID, rec.Error)
	}
	if out == "" {
		out = id + "-" + rec.ID + "." + rec.Format
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = c.DownloadRecording(sctx, id, rec.ID, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	fmt.Fprintf(e.stdout, "%s: %.1f s, %d frames (%s)\n", out, rec.Seconds, rec.Frames, rec.Reason)
	if keep {
		fmt.Fprintf(e.stdout, "kept on the host; its action log: %s\n", rec.URLs.Actions)
		return nil
	}
	return c.DeleteRecording(sctx, id, rec.ID)
}
