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
	done chan struct{} // the capture loop has ended

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
	r := &Recorder{
		id: id, dir: dir, src: src, ended: ended, opts: opts, ffmpeg: ffmpeg, log: log.With("recording", id),
		stop: make(chan string, 1), done: make(chan struct{}),
		info:    Info{ID: id, Desktop: desktop, State: StateRecording, Format: opts.Format, StartedAt: now.UTC(), MaxBytes: opts.MaxBytes},
		actions: actionLog{start: now},
	}
	go r.capture(context.WithoutCancel(ctx), now)
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
// MinInterval, until stopped; then it encodes.
func (r *Recorder) capture(ctx context.Context, start time.Time) {
	defer close(r.done)
	var (
		last   uint64
		buf    *image.RGBA
		enc    []byte
		stored int64
		next   time.Time // the earliest time of the next frame
	)
	poke := time.NewTicker(pokeEvery)
	defer poke.Stop()
	reason := ""
	for reason == "" {
		seq, changed := r.src.Changed()
		if seq != last || last == 0 {
			if wait := time.Until(next); wait > 0 {
				// The rate limit: changes meanwhile land in the next frame.
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case reason = <-r.stop:
					t.Stop()
					continue
				}
			}
			var got uint64
			buf, got = r.src.Frame(buf)
			at := time.Since(start)
			next = start.Add(at + r.opts.MinInterval)
			last = got
			if got == 0 {
				last = 0
			} else {
				var err error
				enc, err = r.jpeg.Encode(enc[:0], buf, r.opts.Quality)
				if err == nil {
					if stored+int64(len(enc)) > r.opts.MaxBytes {
						reason = fmt.Sprintf("its frames reached the disk cap of %d MiB", r.opts.MaxBytes>>20)
						break
					}
					name := fmt.Sprintf("frame-%06d.jpg", len(r.frames)+1)
					err = os.WriteFile(filepath.Join(r.dir, name), enc, 0o600)
					if err != nil {
						os.Remove(filepath.Join(r.dir, name))
						if errors.Is(err, syscall.ENOSPC) {
							reason = "the disk is full: " + err.Error()
						} else {
							reason = "writing a frame failed: " + err.Error()
						}
						break
					}
					stored += int64(len(enc))
					r.mu.Lock()
					if len(r.frames) == 0 {
						r.log.Debug("first frame", "size", size(buf))
					}
					r.frames = append(r.frames, frame{name: name, at: at})
					r.info.Frames = len(r.frames)
					r.info.FrameBytes = stored
					r.mu.Unlock()
				} else {
					r.log.Warn("encode a frame", "err", err)
				}
			}
		}
		select {
		case <-changed:
		case <-poke.C:
			r.src.Poke()
		case reason = <-r.stop:
		case <-ctx.Done():
			reason = "hostd stopped"
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
	r.encode(ctx, frames, end)
}

// encode turns the frames into the video and removes them.
func (r *Recorder) encode(ctx context.Context, frames []frame, end time.Duration) {
	fail := func(err error) {
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

// Remove deletes the recording's files; call it after Stop or End.
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
