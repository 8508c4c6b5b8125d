package vnc

import "image"

// What the Mirror holds, for its readers: the frame, its change counter,
// damage and cursor. All of it is copied or read under the lock.

// Frame copies the current framebuffer into dst, reallocating it when dst
// is nil or of another size, and returns it with the change counter of the
// copy. Before the first complete frame it returns an empty image and 0.
func (m *Mirror) Frame(dst *image.RGBA) (*image.RGBA, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.front
	if src == nil {
		if dst == nil || !dst.Rect.Empty() {
			dst = &image.RGBA{}
		}
		return dst, m.counter
	}
	if dst == nil || dst.Rect.Size() != src.Rect.Size() {
		dst = image.NewRGBA(src.Rect)
	}
	copyImage(dst, src)
	return dst, m.counter
}

// Changed returns the current change counter and a channel closed at the
// next change after it.
func (m *Mirror) Changed() (uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counter, m.changed
}

// Damage returns the rectangles that changed after counter since, up to the
// current counter (nil and true when since is current). ok is false when
// that history is gone or the size changed in between: redraw everything.
func (m *Mirror) Damage(since uint64) (rects []image.Rectangle, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.damage.since(since, m.counter)
}

// Cursor returns the pointer image (not to be modified) and its hotspot when
// the server sent one with the Cursor pseudo-encoding; ok is false
// otherwise, and then the guest draws its pointer into the framebuffer.
func (m *Mirror) Cursor() (img *image.RGBA, hotspot image.Point, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor, m.hotspot, m.hasCursor
}

// Ready is closed when the first complete frame is held.
func (m *Mirror) Ready() <-chan struct{} { return m.ready }

// Size returns the size of the held frame; zero before Ready.
func (m *Mirror) Size() image.Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.front == nil {
		return image.Point{}
	}
	return m.front.Rect.Size()
}

// Connected reports whether a connection to the server is up.
func (m *Mirror) Connected() bool { return m.connected.Load() }
