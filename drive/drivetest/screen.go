// Package drivetest has an in-memory drive.Screen for tests of the drive
// service and of the front doors that call it.
package drivetest

import (
	"context"
	"errors"
	"image"
	"net"
	"sync"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

// Screen is a drive.Screen over an in-memory framebuffer. It has no VNC
// server, and it knows no damage areas: a drag's end does not wait on it.
type Screen struct {
	Src  *screenshottest.Source
	cap  *screenshot.Capturer
	size image.Point
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

// Damage is unknown.
func (s *Screen) Damage(since uint64) ([]image.Rectangle, bool) { return nil, false }

// FollowInput makes the screen change once for each batch of input frames
// that reached machine, when the service pokes it after sending them, as a
// guest that draws its pointer into the framebuffer does.
func (s *Screen) FollowInput(machine *desktoptest.FakeMachine) {
	var mu sync.Mutex
	seen := 0
	s.Src.OnPoke(func() {
		n := len(machine.Inputs())
		mu.Lock()
		changed := n != seen
		seen = n
		mu.Unlock()
		if changed {
			s.Src.Touch()
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
