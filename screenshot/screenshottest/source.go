// Package screenshottest provides an in-memory screenshot.Source and
// desktop-like test frames for the tests of screenshot and of the packages
// that use it (web, input).
package screenshottest

import (
	"image"
	"image/draw"
	"sync"
)

// Source is an in-memory framebuffer that satisfies screenshot.Source. Tests
// change it with SetFrame, Update or Touch and observe Poke and Frame calls.
// Safe for concurrent use.
type Source struct {
	mu       sync.Mutex
	frame    *image.RGBA
	counter  uint64
	changed  chan struct{}
	cursor   *image.RGBA
	hotspot  image.Point
	pokes    int
	frames   int
	onPoke   func()
	onChange func(counter uint64)
	onFrame  func()
}

// NewSource returns a Source showing a copy of frame, at change counter 1.
func NewSource(frame *image.RGBA) *Source {
	return &Source{frame: cloneRGBA(frame), counter: 1, changed: make(chan struct{})}
}

// Frame copies the framebuffer into dst (reallocated when nil or of another
// size) and returns it with the counter of the copied content.
func (s *Source) Frame(dst *image.RGBA) (*image.RGBA, uint64) {
	s.mu.Lock()
	hook := s.onFrame
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames++
	b := s.frame.Bounds()
	if dst == nil || dst.Bounds() != b {
		dst = image.NewRGBA(b)
	}
	draw.Draw(dst, b, s.frame, b.Min, draw.Src)
	return dst, s.counter
}

// Changed returns the current counter and a channel closed at the next change.
func (s *Source) Changed() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counter, s.changed
}

// Poke counts the call and runs the hook set by OnPoke, if any.
func (s *Source) Poke() {
	s.mu.Lock()
	s.pokes++
	hook := s.onPoke
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// Cursor returns the pointer image set by SetCursor.
func (s *Source) Cursor() (*image.RGBA, image.Point, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor, s.hotspot, s.cursor != nil
}

// SetFrame replaces the framebuffer with a copy of frame and counts a change.
func (s *Source) SetFrame(frame *image.RGBA) uint64 {
	c := cloneRGBA(frame)
	return s.change(func() { s.frame = c })
}

// Update lets fn change the framebuffer in place and counts a change. It
// returns the new counter.
func (s *Source) Update(fn func(fb *image.RGBA)) uint64 {
	return s.change(func() { fn(s.frame) })
}

// change runs fn under the lock, then advances the counter and wakes waiters.
func (s *Source) change(fn func()) uint64 {
	s.mu.Lock()
	fn()
	s.counter++
	close(s.changed)
	s.changed = make(chan struct{})
	counter, hook := s.counter, s.onChange
	s.mu.Unlock()
	if hook != nil {
		hook(counter)
	}
	return counter
}

// Fill paints r with c and counts a change, the way a window repaint would.
func (s *Source) Fill(r image.Rectangle, c image.Image) uint64 {
	return s.Update(func(fb *image.RGBA) { draw.Draw(fb, r, c, image.Point{}, draw.Src) })
}

// Touch counts a change without altering pixels: a repaint of identical
// content, which a real server reports as a change too.
func (s *Source) Touch() uint64 {
	return s.change(func() {})
}

// SetCursor sets the pointer image and hotspot Cursor returns; nil clears it.
// The image is not copied and must not be modified afterwards.
func (s *Source) SetCursor(img *image.RGBA, hotspot image.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor, s.hotspot = img, hotspot
}

// OnPoke sets a hook run on every Poke, outside the Source's lock, for
// example to simulate a server that sends an update when asked.
func (s *Source) OnPoke(hook func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPoke = hook
}

// OnFrame sets a hook run at the start of every Frame call, outside the
// Source's lock: to hold a capture in progress, or change the screen under it.
func (s *Source) OnFrame(hook func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onFrame = hook
}

// OnChange sets a hook run after every change with the new counter.
func (s *Source) OnChange(hook func(counter uint64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = hook
}

// Pokes returns how many times Poke was called.
func (s *Source) Pokes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pokes
}

// FrameCalls returns how many times Frame was called.
func (s *Source) FrameCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frames
}

// Counter returns the current change counter.
func (s *Source) Counter() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counter
}

func cloneRGBA(src *image.RGBA) *image.RGBA {
	dst := image.NewRGBA(src.Bounds())
	draw.Draw(dst, dst.Rect, src, src.Rect.Min, draw.Src)
	return dst
}
