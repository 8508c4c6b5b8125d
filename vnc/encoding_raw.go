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

// setOpaque sets the alpha byte of every RGBX pixel in p to 255, eight
// pixels per iteration; the unrolled form runs about twice as fast as one
// word at a time, and Raw decoding is mostly this loop.
func setOpaque(p []byte) {
	const alphas = 0xff000000_ff000000
	le := binary.LittleEndian
	for len(p) >= 32 {
		q := p[:32:32]
		le.PutUint64(q[0:], le.Uint64(q[0:])|alphas)
		le.PutUint64(q[8:], le.Uint64(q[8:])|alphas)
		le.PutUint64(q[16:], le.Uint64(q[16:])|alphas)
		le.PutUint64(q[24:], le.Uint64(q[24:])|alphas)
		p = p[32:]
	}
	for i := 3; i < len(p); i += 4 {
		p[i] = 0xff
	}
}
