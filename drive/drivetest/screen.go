// Package drivetest has an in-memory drive.Screen for tests of the drive
// service and of the front doors that call it.
package drivetest

import (
	"context"
	"errors"
	"image"
	"image/color"
	"net"
	"sync"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

// Screen is a drive.Screen over an in-memory framebuffer, without a VNC
// server. It keeps the areas changed through Draw (and FollowInput); any
// other change (Src's own methods) makes the history unknown, as a VNC
// mirror's does when it falls behind.
type Screen struct {
	Src  *screenshottest.Source
	cap  *screenshot.Capturer
	size image.Point

	mu     sync.Mutex
	damage []damage
	// lost is the last counter whose change Draw did not make.
	lost uint64
}

type damage struct {
	counter uint64
	rect    image.Rectangle
}

var _ drive.Screen = (*Screen)(nil)

// NewScreen returns a white w x h screen.
func NewScreen(w, h int) *Screen {
	frame := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range frame.Pix {
		frame.Pix[i] = 0xff
	}
	src := screenshottest.NewSource(frame)
	return &Screen{Src: src, cap: screenshot.NewCapturer(src, screenshot.CaptureConfig{}), size: image.Pt(w, h)}
}

// Source is the framebuffer.
func (s *Screen) Source() screenshot.Source { return s.Src }

// Capture encodes a picture.
func (s *Screen) Capture(ctx context.Context, o screenshot.Options) (screenshot.Shot, error) {
	return s.cap.Capture(ctx, o)
}

// Dial fails: there is no VNC server.
func (s *Screen) Dial(ctx context.Context) (net.Conn, error) {
	return nil, errors.New("the test screen has no VNC server")
}

// Ready is closed: the screen always holds a frame.
func (s *Screen) Ready() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Size is the framebuffer's size.
func (s *Screen) Size() image.Point { return s.size }

// Draw changes an area of the screen and keeps it as damage.
func (s *Screen) Draw(r image.Rectangle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.Src.Fill(r, image.NewUniform(color.RGBA{uint8(len(s.damage)), 0x80, 0x40, 0xff}))
	s.damage = append(s.damage, damage{c, r})
}

// Damage returns the areas drawn after counter since; ok is false when a
// change not made by Draw happened after it.
func (s *Screen) Damage(since uint64) ([]image.Rectangle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Src.Counter()
	drawn := map[uint64]bool{}
	var out []image.Rectangle
	for _, d := range s.damage {
		if d.counter > since {
			out = append(out, d.rect)
			drawn[d.counter] = true
		}
	}
	for c := since + 1; c <= now; c++ {
		if !drawn[c] {
			return nil, false
		}
	}
	return out, true
}

// FollowInput makes the screen follow the input frames that reach
// machine, when the service pokes it after sending them, as a guest does:
// a move redraws the pointer (a small area at it), a key draws text (a
// line: a reaction); button frames change nothing by themselves.
func (s *Screen) FollowInput(machine *desktoptest.FakeMachine) {
	var mu sync.Mutex
	seen := 0
	s.Src.OnPoke(func() {
		frames := machine.Inputs()
		mu.Lock()
		news := frames[min(seen, len(frames)):]
		seen = len(frames)
		mu.Unlock()
		for _, f := range news {
			for _, e := range f {
				switch e.Kind {
				case desktop.InputMove:
					x, y := min(max(e.X, 0), s.size.X-16), min(max(e.Y, 0), s.size.Y-16)
					s.Draw(image.Rect(x, y, x+16, y+16))
				case desktop.InputKey:
					if e.Down {
						s.Draw(image.Rect(0, s.size.Y-20, s.size.X, s.size.Y))
					}
				}
			}
		}
	})
}

// Screens gives every desktop the same screen, or the one set for it.
type Screens struct {
	Default *Screen
	mu      sync.Mutex
	byID    map[string]*Screen
}

// Set gives one desktop its own screen.
func (ss *Screens) Set(id string, s *Screen) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.byID == nil {
		ss.byID = map[string]*Screen{}
	}
	ss.byID[id] = s
}

// Screen implements drive.Screens.
func (ss *Screens) Screen(id string) (drive.Screen, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.byID[id]; ok {
		return s, true
	}
	if ss.Default == nil {
		return nil, false
	}
	return ss.Default, true
}
