package app_test

import (
	"image"
	"image/color"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// The browser flavor end to end: a desktop created from its snapshot has
// Chromium open on the start page at once (images/guest/start.html: a
// #f4f1ea page with one text field and a Go button that copies the field
// into the window title), and an agent can fill the form with the action
// API alone.

// pageColor is the start page's background.
var pageColor = color.RGBA{0xf4, 0xf1, 0xea, 0xff}

// colorShare is the fraction of pixels near c.
func colorShare(img *image.RGBA, c color.RGBA) float64 {
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if near(img.RGBAAt(x, y), c) {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}

// findField finds the page's text field: the first row at or below fromY
// with a white run at least minRun pixels long (the page itself is not
// white). It returns a point inside the field, a few rows below its top
// border.
func findField(img *image.RGBA, fromY, minRun int) (image.Point, bool) {
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	b := img.Bounds()
	for y := fromY; y < b.Max.Y; y++ {
		run := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			if near(img.RGBAAt(x, y), white) {
				run++
				continue
			}
			if run >= minRun {
				return image.Pt(x-run/2, y+8), true
			}
			run = 0
		}
	}
	return image.Point{}, false
}

func TestBrowserDesktopEndToEnd(t *testing.T) {
	s := startStackOn(t, images.FlavorBrowser)

	// Open at creation: the window exists the moment the create returns,
	// with no wait on our side.
	if res := s.shell(t, "DISPLAY=:0 xdotool search --onlyvisible --name '^warmdesk start page'"); res.ExitCode != 0 {
		t.Fatalf("no visible Chromium window on the start page right after create: exit %d, %s", res.ExitCode, res.Stderr)
	}
	img := s.screen(t)
	if share := colorShare(img, pageColor); share < 0.3 {
		t.Fatalf("the start page covers %.0f%% of the screen, want at least 30%%", 100*share)
	}
	field, ok := findField(img, 100, 100)
	if !ok {
		t.Fatal("no text field on the start page")
	}
	t.Logf("text field at %v", field)

	// Click the field and let the screen settle, as an agent loop does
	// (an action, then a screenshot): under TCG, keys sent in the same
	// batch right after the click reached Chromium before it had moved
	// focus to the field and were lost (docs/API.md, known limits).
	settle := 1000
	s.actions(t, api.ActionsRequest{Actions: input.Batch{
		{Kind: input.KindClick, At: &input.Point{X: field.X, Y: field.Y}},
	}, Screenshot: true, SettleMs: &settle})
	// Type, Tab to the button and press it.
	s.actions(t, api.ActionsRequest{Actions: input.Batch{
		{Kind: input.KindType, Text: "hello"},
		{Kind: input.KindKey, Chord: "Tab"},
		{Kind: input.KindKey, Chord: "space"},
	}})

	// Chromium appends " - Chromium" to a page's title. The page retitles
	// its window on its own time (Chromium under TCG is slow).
	submitted := func() bool {
		return s.shell(t, "DISPLAY=:0 xdotool search --name '^clicked: hello( - Chromium)?$'").ExitCode == 0
	}
	if !testenv.Poll(90*time.Second, 200*time.Millisecond, 3*time.Second, submitted) {
		titles := s.shell(t, "DISPLAY=:0 xdotool search --onlyvisible --name . getwindowname %@")
		t.Fatalf("the page never showed 'clicked: hello'; visible windows: %q", titles.Stdout)
	}
}
