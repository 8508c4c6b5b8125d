package vnc

import (
	"encoding/binary"
	"fmt"
	"image"
	"io"
)

// RFC 6143 section 7.7.2, CopyRect: the rectangle is a copy of another area
// of the framebuffer, given by its top-left corner.

func (d *decoder) readCopyRect(h rectHeader) error {
	b := d.hdr[:4]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return fmt.Errorf("read copyrect source: %w", err)
	}
	dst := h.rect()
	src := image.Rect(0, 0, h.w, h.h).Add(image.Pt(int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))))
	if err := d.inside(dst); err != nil {
		return err
	}
	if err := d.inside(src); err != nil {
		return fmt.Errorf("copyrect source: %w", err)
	}
	d.addDamage(dst)
	copyWithin(d.fb, dst, src.Min)
	return nil
}

// copyWithin copies the area at src to dst inside one image; the areas may
// overlap, so rows go bottom-up when moving down.
func copyWithin(img *image.RGBA, dst image.Rectangle, src image.Point) {
	rowBytes := dst.Dx() * bytesPerPixel
	if rowBytes == 0 {
		return
	}
	copyRow := func(dy int) {
		so := img.PixOffset(src.X, src.Y+dy)
		do := img.PixOffset(dst.Min.X, dst.Min.Y+dy)
		copy(img.Pix[do:do+rowBytes], img.Pix[so:so+rowBytes])
	}
	if src.Y < dst.Min.Y {
		for dy := dst.Dy() - 1; dy >= 0; dy-- {
			copyRow(dy)
		}
		return
	}
	for dy := 0; dy < dst.Dy(); dy++ {
		copyRow(dy)
	}
}
