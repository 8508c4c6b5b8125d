package vnc

import (
	"fmt"
	"image"
	"io"
)

// RFC 6143 section 7.8.1, the Cursor pseudo-encoding: x and y are the
// hotspot, w and h the size, then w*h pixels and a bitmask of
// ceil(w/8)*h bytes, most significant bit first, 1 for a visible pixel.

func (d *decoder) readCursor(h rectHeader) error {
	if h.w > d.lim.MaxCursorSize || h.h > d.lim.MaxCursorSize {
		return fmt.Errorf("cursor %dx%d over the limit of %d: %w", h.w, h.h, d.lim.MaxCursorSize, ErrProtocol)
	}
	pixLen := h.w * h.h * bytesPerPixel
	maskStride := (h.w + 7) / 8
	buf := d.scratchN(pixLen + maskStride*h.h)
	if _, err := io.ReadFull(d.r, buf); err != nil {
		return fmt.Errorf("read cursor: %w", err)
	}
	pix, mask := buf[:pixLen], buf[pixLen:]
	img := image.NewRGBA(image.Rect(0, 0, h.w, h.h))
	for y := 0; y < h.h; y++ {
		for x := 0; x < h.w; x++ {
			if mask[y*maskStride+x/8]&(0x80>>(x%8)) == 0 {
				continue // transparent: all zero, as premultiplied alpha wants
			}
			i := (y*h.w + x) * bytesPerPixel
			o := img.PixOffset(x, y)
			img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = pix[i+2], pix[i+1], pix[i], 0xff
		}
	}
	d.cursor = img
	// A hotspot outside the image is harmless but meaningless; clamp it.
	d.hotspot = image.Pt(clamp(h.x, 0, max(h.w-1, 0)), clamp(h.y, 0, max(h.h-1, 0)))
	d.hasCursor = true
	d.update.CursorChanged = true
	return nil
}

func clamp(v, lo, hi int) int {
	return max(lo, min(v, hi))
}
