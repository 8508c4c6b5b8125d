package vnc

import (
	"bytes"
	"image"
	"math/bits"
)

// Publishing a decoded update into the mirror's front buffer. Only Run's
// goroutine writes the front buffer, so it compares without the lock and
// takes the lock only to copy the rows that changed: Frame never waits for
// more than a memory copy.

// publish copies the rows of fb's damaged rectangles that differ from the
// front buffer, and counts a change if there were any.
func (m *Mirror) publish(fb *image.RGBA, damage []image.Rectangle) {
	front := m.front
	m.bands = m.bands[:0]
	m.rects = m.rects[:0]
	for _, r := range damage {
		n := len(m.bands)
		m.bands = appendChangedBands(m.bands, front, fb, r)
		if len(m.bands) > n {
			m.rects = append(m.rects, unionOf(m.bands[n:]))
		}
	}
	if len(m.bands) == 0 {
		return
	}
	m.mu.Lock()
	for _, b := range m.bands {
		copyRows(front, fb, b)
	}
	m.bumpLocked(m.rects, false)
	m.mu.Unlock()
}

// publishFull makes fb the mirror's picture once a connection, or a new
// size, has been painted completely.
func (m *Mirror) publishFull(fb *image.RGBA, cursor *image.RGBA, hotspot image.Point, hasCursor bool) {
	front := m.front
	if front != nil && front.Rect == fb.Rect {
		m.bands = appendChangedBands(m.bands[:0], front, fb, fb.Rect)
		m.mu.Lock()
		for _, b := range m.bands {
			copyRows(front, fb, b)
		}
		if len(m.bands) > 0 {
			m.bumpLocked(append(m.rects[:0], unionOf(m.bands)), false)
		}
		m.cursor, m.hotspot, m.hasCursor = cursor, hotspot, hasCursor
		m.mu.Unlock()
	} else {
		next := image.NewRGBA(fb.Rect)
		copy(next.Pix, fb.Pix)
		m.mu.Lock()
		m.front = next
		m.bumpLocked(append(m.rects[:0], next.Rect), true)
		m.cursor, m.hotspot, m.hasCursor = cursor, hotspot, hasCursor
		m.mu.Unlock()
	}
	m.readyOnce.Do(func() { close(m.ready) })
}

func (m *Mirror) setCursor(img *image.RGBA, hotspot image.Point, ok bool) {
	m.mu.Lock()
	m.cursor, m.hotspot, m.hasCursor = img, hotspot, ok
	m.mu.Unlock()
}

func (m *Mirror) bumpLocked(rects []image.Rectangle, resized bool) {
	m.counter++
	m.damage.add(m.counter, rects, resized)
	close(m.changed)
	m.changed = make(chan struct{})
}

// appendChangedBands appends to bands the runs of consecutive rows of r in
// which src differs from dst. Both images have the same bounds.
func appendChangedBands(bands []image.Rectangle, dst, src *image.RGBA, r image.Rectangle) []image.Rectangle {
	rowBytes := r.Dx() * bytesPerPixel
	if rowBytes == 0 {
		return bands
	}
	start := -1
	for y := r.Min.Y; y < r.Max.Y; y++ {
		o := src.PixOffset(r.Min.X, y)
		if bytes.Equal(src.Pix[o:o+rowBytes], dst.Pix[o:o+rowBytes]) {
			if start >= 0 {
				bands = append(bands, image.Rect(r.Min.X, start, r.Max.X, y))
				start = -1
			}
		} else if start < 0 {
			start = y
		}
	}
	if start >= 0 {
		bands = append(bands, image.Rect(r.Min.X, start, r.Max.X, r.Max.Y))
	}
	return bands
}

// copyRows copies rectangle r from src to dst, images of the same bounds.
func copyRows(dst, src *image.RGBA, r image.Rectangle) {
	rowBytes := r.Dx() * bytesPerPixel
	if rowBytes == src.Stride && dst.Stride == src.Stride {
		lo, hi := src.PixOffset(0, r.Min.Y), src.PixOffset(0, r.Max.Y)
		copy(dst.Pix[lo:hi], src.Pix[lo:hi])
		return
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		o := src.PixOffset(r.Min.X, y)
		copy(dst.Pix[o:o+rowBytes], src.Pix[o:o+rowBytes])
	}
}

// copyImage copies src into dst of the same size; dst may have another
// origin or stride (a sub-image, say).
func copyImage(dst, src *image.RGBA) {
	rowBytes := src.Rect.Dx() * bytesPerPixel
	if dst.Stride == src.Stride && dst.Stride == rowBytes && len(dst.Pix) >= len(src.Pix) {
		copy(dst.Pix, src.Pix[:rowBytes*src.Rect.Dy()])
		return
	}
	for y := 0; y < src.Rect.Dy(); y++ {
		so := y * src.Stride
		do := y * dst.Stride
		copy(dst.Pix[do:do+rowBytes], src.Pix[so:so+rowBytes])
	}
}

func unionOf(rs []image.Rectangle) image.Rectangle {
	var u image.Rectangle
	for _, r := range rs {
		u = u.Union(r)
	}
	return u
}

// coverage tracks which pixels of a new framebuffer have been painted, one
// bit per pixel, so that the mirror publishes a new connection's picture
// only once it is complete.
type coverage struct {
	width     int
	bits      []uint64
	remaining int
}

func newCoverage(size image.Point) *coverage {
	n := size.X * size.Y
	return &coverage{width: size.X, bits: make([]uint64, (n+63)/64), remaining: n}
}

func (c *coverage) complete() bool { return c.remaining == 0 }

func (c *coverage) mark(r image.Rectangle) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		c.remaining -= setBits(c.bits, y*c.width+r.Min.X, y*c.width+r.Max.X)
	}
}

// setBits sets bits [lo, hi) and returns how many were newly set.
func setBits(words []uint64, lo, hi int) int {
	n := 0
	for lo < hi {
		w := lo / 64
		end := min(hi, (w+1)*64)
		mask := ^uint64(0) >> (64 - (end - lo)) << (lo % 64)
		n += bits.OnesCount64(mask &^ words[w])
		words[w] |= mask
		lo = end
	}
	return n
}
