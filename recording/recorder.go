package recording

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/screenshot"
)

// pokeEvery is how often a recorder asks the mirror to look for changes:
// QEMU's VNC server slows its refresh while idle, and a change the guest
// makes by itself (a page's animation) would otherwise be seen late.
const pokeEvery = 500 * time.Millisecond

// Recorder records one desktop's screen into its own directory.
type Recorder struct {
	id     string
	dir    string
	src    screenshot.Source
	opts   Options
	ffmpeg string
	log    *slog.Logger
	jpeg   screenshot.JPEGEncoder
	// ended hears once that capture ended (before the encoding).
	ended func(Info)

	stop chan string   // the reason, once
	done chan struct{} // capture and encoding have ended
	// abort ends capture and encoding at once, for a recording being
	// deleted: nobody will watch its video.
	abort context.CancelFunc

	mu      sync.Mutex
	info    Info
	frames  []frame
	actions actionLog
	video   string
}

// Start begins recording src into dir (made here; it must not exist).
// ended, if set, hears once when capture ends, before the encoding.
func Start(ctx context.Context, dir, id, desktop string, src screenshot.Source, opts Options, log *slog.Logger, ended func(Info)) (*Recorder, error) {
	opts = opts.withDefaults()
	if err := CheckFormat(opts.Format); err != nil {
		return nil, err
	}
	ffmpeg, err := findFFmpeg(opts.FFmpeg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("recording directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording directory: %w", err)
	}
	now := time.Now()
	aborted, abort := context.WithCancel(context.WithoutCancel(ctx))
	r := &Recorder{
		abort: abort,
		id:    id, dir: dir, src: src, ended: ended, opts: opts, ffmpeg: ffmpeg, log: log.With("recording", id),
		stop: make(chan string, 1), done: make(chan struct{}),
		info:    Info{ID: id, Desktop: desktop, State: StateRecording, Format: opts.Format, StartedAt: now.UTC(), MaxBytes: opts.MaxBytes},
		actions: actionLog{start: now},
	}
	go r.capture(aborted, now)
	return r, nil
}

// Info is the recording's state now.
func (r *Recorder) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.info
	if in.State == StateRecording {
		in.Seconds = time.Since(r.actions.start).Seconds()
	}
	return in
}

// Note adds a line to the action log, at time at.
func (r *Recorder) Note(at time.Time, kind, summary string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.info.State != StateRecording {
		return
	}
	r.actions.add(at, kind, summary)
}

// Actions is the action log, in time order.
func (r *Recorder) Actions() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.actions.entries...)
}

// Video is the encoded file, once the recording is done.
func (r *Recorder) Video() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.video, r.info.State == StateDone
}

// End stops capturing (reason says why) without waiting for the encoding.
func (r *Recorder) End(reason string) {
	select {
	case r.stop <- reason:
	default:
	}
}

// Discard ends the recording without encoding it (or cuts its encoding
// short), for a recording about to be removed.
func (r *Recorder) Discard() {
	r.End("deleted")
	r.abort()
}

// Stop ends the recording and encodes it; it returns once the video is
// written (or its encoding failed) or ctx ends.
func (r *Recorder) Stop(ctx context.Context, reason string) (Info, error) {
	r.End(reason)
	select {
	case <-r.done:
	case <-ctx.Done():
		return r.Info(), ctx.Err()
	}
	in := r.Info()
	if in.State == StateFailed {
		return in, errors.New(in.Error)
	}
	return in, nil
}

// capture writes a frame whenever the picture changed, at most one per
// MinInterval, until stopped; then it takes the picture as it is at the
// stop (so the video ends on it) and encodes.
func (r *Recorder) capture(ctx context.Context, start time.Time) {
	defer close(r.done)
	c := capturer{r: r, start: start}
	poke := time.NewTicker(pokeEvery)
	defer poke.Stop()
	var next time.Time // the earliest time of the next frame
	reason := ""
	for reason == "" {
		seq, changed := r.src.Changed()
		if seq != c.last || c.last == 0 {
			if wait := time.Until(next); wait > 0 {
				// The rate limit: changes meanwhile land in the next frame.
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case reason = <-r.stop:
					t.Stop()
				case <-ctx.Done():
					t.Stop()
					reason = "deleted"
				}
				if reason != "" {
					break
				}
			}
			next = time.Now().Add(r.opts.MinInterval)
			if reason = c.grab(); reason != "" {
				break
			}
		}
		select {
		case <-changed:
		case <-poke.C:
			r.src.Poke()
		case reason = <-r.stop:
		case <-ctx.Done():
			reason = "deleted"
		}
	}
	if ctx.Err() == nil && !c.failed {
		if seq, _ := r.src.Changed(); seq != c.last {
			c.grab() // the last picture; its failure ends nothing more
		}
	}
	end := time.Since(start)
	now := time.Now().UTC()
	r.mu.Lock()
	r.info.EndedAt = &now
	r.info.Reason = reason
	r.info.Seconds = end.Seconds()
	r.info.State = StateEncoding
	frames := append([]frame(nil), r.frames...)
	info := r.info
	r.mu.Unlock()
	if r.ended != nil {
		r.ended(info)
	}
	if ctx.Err() != nil {
		r.mu.Lock()
		r.info.State = StateFailed
		r.info.Error = "deleted before it was encoded"
		r.mu.Unlock()
		return
	}
	r.encode(ctx, frames, end)
}

// capturer writes a recording's frames.
type capturer struct {
	r      *Recorder
	start  time.Time
	last   uint64 // the change counter of the last frame
	buf    *image.RGBA
	enc    []byte
	stored int64
	failed bool // a frame could not be kept: no more are taken
}

// grab writes the picture as it is now as the next frame. A non-empty
// answer ends the recording: the disk cap, a full disk.
func (c *capturer) grab() (reason string) {
	r := c.r
	var got uint64
	c.buf, got = r.src.Frame(c.buf)
	at := time.Since(c.start)
	c.last = got
	if got == 0 {
		return "" // no picture yet
	}
	var err error
	c.enc, err = r.jpeg.Encode(c.enc[:0], c.buf, r.opts.Quality)
	if err != nil {
		r.log.Warn("encode a frame", "err", err)
		return ""
	}
	if c.stored+int64(len(c.enc)) > r.opts.MaxBytes {
		c.failed = true
		return fmt.Sprintf("its frames reached the disk cap of %d MiB", r.opts.MaxBytes>>20)
	}
	r.mu.Lock()
	name := fmt.Sprintf("frame-%06d.jpg", len(r.frames)+1)
	r.mu.Unlock()
	if err := os.WriteFile(filepath.Join(r.dir, name), c.enc, 0o600); err != nil {
		os.Remove(filepath.Join(r.dir, name))
		c.failed = true
		if errors.Is(err, syscall.ENOSPC) {
			return "the disk is full: " + err.Error()
		}
		return "writing a frame failed: " + err.Error()
	}
	c.stored += int64(len(c.enc))
	r.mu.Lock()
	r.frames = append(r.frames, frame{name: name, at: at})
	r.info.Frames = len(r.frames)
	r.info.FrameBytes = c.stored
	r.mu.Unlock()
	return ""
}

// encode turns the frames into the video and removes them.
func (r *Recorder) encode(ctx context.Context, frames []frame, end time.Duration) {
	fail := func(err error) {
		if ctx.Err() != nil {
			// Discarded meanwhile: ffmpeg's end is the discard's doing,
			// whichever came first, the stop or the abort.
			err = errors.New("deleted while it was encoded")
		}
		r.mu.Lock()
		r.info.State = StateFailed
		r.info.Error = err.Error()
		r.mu.Unlock()
		r.log.Warn("recording not encoded", "err", err)
	}
	if len(frames) == 0 {
		fail(errors.New("no frame was captured (the desktop's screen mirror had no picture)"))
		return
	}
	list := filepath.Join(r.dir, "frames.ffconcat")
	if err := os.WriteFile(list, []byte(concatList(frames, end)), 0o600); err != nil {
		fail(fmt.Errorf("write the frame list: %w", err))
		return
	}
	out := filepath.Join(r.dir, "video."+r.opts.Format)
	ectx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ectx, r.ffmpeg, ffmpegArgs(list, out, r.opts.Format)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(out)
		fail(fmt.Errorf("ffmpeg: %w: %s", err, bytes.TrimSpace(tail(stderr.Bytes(), 2000))))
		return
	}
	st, err := os.Stat(out)
	if err != nil {
		fail(err)
		return
	}
	for _, f := range frames {
		os.Remove(filepath.Join(r.dir, f.name))
	}
	os.Remove(list)
	r.mu.Lock()
	r.video = out
	r.info.State = StateDone
	r.info.VideoBytes = st.Size()
	r.info.EncodeCPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	r.mu.Unlock()
}

// Remove deletes the recording's files once it has ended; call it after
// Stop, End or Discard.
func (r *Recorder) Remove(ctx context.Context) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return os.RemoveAll(r.dir)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
