// Package recording makes videos of a desktop's screen with a log of what
// was done to it, for browser tests and for people reviewing an agent's
// run.
//
// While recording, a Recorder writes a JPEG of the screen mirror's picture
// each time it changes (at most one per Options.MinInterval), and nothing
// while the screen is still: an idle desktop costs almost nothing. At the
// stop, ffmpeg (Debian's package, run as a program) turns the frames into
// one video with each frame shown exactly as long as it was on the screen
// (variable frame rate, from ffmpeg's concat list with durations), and the
// frames are removed. Encoding at the stop rather than live keeps the
// timing exact whatever the host's load, and the recording's CPU cost
// while the test runs to one JPEG per change.
package recording

import (
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// States of a recording.
const (
	StateRecording = "recording"
	StateEncoding  = "encoding"
	StateDone      = "done"
	StateFailed    = "failed"
)

// Formats a recording can be encoded to.
const (
	FormatMP4  = "mp4"  // H.264, what browsers and test reports play everywhere
	FormatWebM = "webm" // VP8
)

// Defaults of Options.
const (
	DefaultMaxBytes    = 256 << 20
	DefaultMinInterval = 100 * time.Millisecond
	DefaultQuality     = 75
)

// Options shape a recording.
type Options struct {
	Format string
	// MaxBytes caps the frames a recording keeps on disk; reaching it ends
	// the recording, which keeps what it has.
	MaxBytes int64
	// MinInterval is the shortest time between two frames (10 per second by
	// default): faster changes are seen at the next frame.
	MinInterval time.Duration
	Quality     int
	// FFmpeg is the ffmpeg program; "" looks for ffmpeg on PATH.
	FFmpeg string
}

func (o Options) withDefaults() Options {
	if o.Format == "" {
		o.Format = FormatMP4
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.Quality <= 0 {
		o.Quality = DefaultQuality
	}
	return o
}

// ErrNoFFmpeg: ffmpeg is not installed.
var ErrNoFFmpeg = errors.New("ffmpeg is not installed: install Debian's ffmpeg package (apt-get install ffmpeg) to record desktops")

// findFFmpeg returns the ffmpeg program to run.
func findFFmpeg(path string) (string, error) {
	if path == "" {
		path = "ffmpeg"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoFFmpeg, err)
	}
	return p, nil
}

// CheckFormat says what is wrong with a format name, or nil.
func CheckFormat(f string) error {
	switch f {
	case "", FormatMP4, FormatWebM:
		return nil
	}
	return fmt.Errorf("format %q: use mp4 (H.264) or webm (VP8)", f)
}

// Info is a recording as the API shows it.
type Info struct {
	ID        string     `json:"id"`
	Desktop   string     `json:"desktop"`
	State     string     `json:"state"`
	Format    string     `json:"format"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Reason says why it ended: stopped, the desktop was deleted, the
	// disk cap, a full disk.
	Reason string `json:"reason,omitempty"`
	// Error says why encoding failed.
	Error      string  `json:"error,omitempty"`
	Frames     int     `json:"frames"`
	FrameBytes int64   `json:"frame_bytes"`
	MaxBytes   int64   `json:"max_bytes"`
	VideoBytes int64   `json:"video_bytes,omitempty"`
	Seconds    float64 `json:"seconds"`
	// EncodeCPUSeconds is the CPU time ffmpeg took to encode it.
	EncodeCPUSeconds float64 `json:"encode_cpu_s,omitempty"`
}

// Entry is one line of a recording's action log: what happened to the
// desktop, at a time in the recording's own time base.
type Entry struct {
	// AtMs is the time since the recording started, in milliseconds: the
	// video's own timeline.
	AtMs float64   `json:"at_ms"`
	Time time.Time `json:"time"`
	// Kind is action, exec, control, devtools, state or reset.
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
}

// actionLog keeps entries in the order of their times, whatever order they
// were told in (events reach it from several goroutines).
type actionLog struct {
	start   time.Time
	entries []Entry
}

func (l *actionLog) add(at time.Time, kind, summary string) {
	e := Entry{AtMs: float64(at.Sub(l.start).Microseconds()) / 1000, Time: at.UTC(), Kind: kind, Summary: summary}
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Time.After(at) })
	l.entries = append(l.entries, Entry{})
	copy(l.entries[i+1:], l.entries[i:])
	l.entries[i] = e
}

// frame is one frame file and when it was seen, since the start.
type frame struct {
	name string
	at   time.Duration
}

// concatList is ffmpeg's concat demuxer list that shows each frame until
// the next one, the first from the recording's start (the video's time is
// the recording's, as the action log's is), the last until end. The last
// file is listed twice: the demuxer ignores the duration of the list's
// last entry. Each image is opened at 1000 frames a second so that its
// timestamps are in milliseconds: at the image reader's default 25, frames
// closer than 40 ms would share a timestamp and be dropped.
func concatList(frames []frame, end time.Duration) string {
	var b strings.Builder
	b.WriteString("ffconcat version 1.0\n")
	for i, f := range frames {
		next := end
		if i+1 < len(frames) {
			next = frames[i+1].at
		}
		from := f.at
		if i == 0 {
			from = 0
		}
		d := next - from
		if d < time.Millisecond {
			d = time.Millisecond
		}
		fmt.Fprintf(&b, "file '%s'\noption framerate 1000\nduration %.3f\n", f.name, d.Seconds())
	}
	if len(frames) > 0 {
		fmt.Fprintf(&b, "file '%s'\noption framerate 1000\n", frames[len(frames)-1].name)
	}
	return b.String()
}

// ffmpegArgs is the command line that encodes a concat list into out.
// Odd sizes are padded by a pixel: H.264 and VP8 in 4:2:0 need even ones.
func ffmpegArgs(list, out, format string) []string {
	args := []string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y",
		"-f", "concat", "-safe", "0", "-i", list,
		"-fps_mode", "vfr", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-pix_fmt", "yuv420p"}
	switch format {
	case FormatWebM:
		args = append(args, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M", "-f", "webm")
	default:
		args = append(args, "-c:v", "libx264", "-preset", "veryfast", "-crf", "28", "-movflags", "+faststart", "-f", "mp4")
	}
	return append(args, out)
}
