package testenv

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"testing"
)

// ProbeVideo reads a video's duration and frame count with ffmpeg's
// ffprobe, failing the test when it cannot.
func ProbeVideo(t *testing.T, path string) (seconds float64, frames int) {
	t.Helper()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Fatalf("ffmpeg's ffprobe is needed (scripts/setup installs ffmpeg): %v", err)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "format=duration:stream=nb_read_frames", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var p struct {
		Format  struct{ Duration string }
		Streams []struct {
			NbReadFrames string `json:"nb_read_frames"`
		}
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) != 1 {
		t.Fatalf("ffprobe %s: %s %v", path, out, err)
	}
	seconds, err = strconv.ParseFloat(p.Format.Duration, 64)
	if err != nil {
		t.Fatalf("ffprobe %s: duration %q: %v", path, p.Format.Duration, err)
	}
	frames, err = strconv.Atoi(p.Streams[0].NbReadFrames)
	if err != nil {
		t.Fatalf("ffprobe %s: frames %q: %v", path, p.Streams[0].NbReadFrames, err)
	}
	return seconds, frames
}
