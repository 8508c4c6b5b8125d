package drive

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/input"
)

func TestSummarize(t *testing.T) {
	b := input.Batch{
		{Kind: input.KindClick, At: &input.Point{X: 10, Y: 20}},
		{Kind: input.KindClick, At: &input.Point{X: 1, Y: 2}, Count: 2, Button: input.ButtonRight},
		{Kind: input.KindType, Text: "hunter2 日本"},
		{Kind: input.KindKey, Chord: "ctrl+l"},
		{Kind: input.KindScroll, DY: 3},
		{Kind: input.KindWait, Duration: time.Second},
		{Kind: input.KindScreenshot},
	}
	got := summarize(b, nil)
	want := "agent: click at 10,20, right double-click at 1,2, type 10 characters, key ctrl+l, scroll +0,+3, wait 1s, and 1 more"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if strings.Contains(got, "hunter2") {
		t.Error("typed text leaked into the summary")
	}
	if got := summarize(input.Batch{{Kind: input.KindScreenshot}}, errors.New("boom\nmore")); got != "agent: screenshot (failed: boom)" {
		t.Errorf("failure summary %q", got)
	}
}
