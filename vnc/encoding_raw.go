package vnc

import (
	"encoding/binary"
	"fmt"
	"io"
)

// RFC 6143 section 7.7.1, Raw: width*height pixels, left to right, top to
// bottom. In pixelFormatRGBX they are already image.RGBA's byte order, so
// they are read straight into the framebuffer.

func (d *decoder) readRaw(h rectHeader) error {
	r := h.rect()
	if err := d.inside(r); err != nil {
		return err
	}
	d.addDamage(r)
	if r.Empty() {
		return nil
	}
	fb := d.fb
	rowBytes := r.Dx() * bytesPerPixel
	if rowBytes == fb.Stride {
		// Full-width rows are contiguous: one read for the whole rectangle.
		p := fb.Pix[r.Min.Y*fb.Stride : r.Max.Y*fb.Stride]
		if _, err := io.ReadFull(d.r, p); err != nil {
			return fmt.Errorf("read raw pixels: %w", err)
		}
		setOpaque(p)
		return nil
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := fb.PixOffset(r.Min.X, y)
		p := fb.Pix[off : off+rowBytes]
		if _, err := io.ReadFull(d.r, p); err != nil {
			return fmt.Errorf("read raw pixels: %w", err)
		}
		setOpaque(p)
	}
	return nil
}

// setOpaque sets the alpha byte of every RGBX pixel in p to 255, two pixels
// per 64-bit word.
func setOpaque(p []byte) {
	const alphas = 0xff000000_ff000000
	i := 0
	for ; i+8 <= len(p); i += 8 {
		v := binary.LittleEndian.Uint64(p[i:])
		binary.LittleEndian.PutUint64(p[i:], v|alphas)
	}
	for i += 3; i < len(p); i += 4 {
		p[i] = 0xff
	}
}
