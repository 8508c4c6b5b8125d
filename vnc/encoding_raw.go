package vnc

import (
	"encoding/binary"
	"fmt"
	"io"
)

// RFC 6143 section 7.7.1, Raw: width*height pixels, left to right, top to
// bottom. They are read straight into the framebuffer and turned from
// pixelFormatBGRX into image.RGBA's byte order in place.

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
		toRGBA(p)
		return nil
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := fb.PixOffset(r.Min.X, y)
		p := fb.Pix[off : off+rowBytes]
		if _, err := io.ReadFull(d.r, p); err != nil {
			return fmt.Errorf("read raw pixels: %w", err)
		}
		toRGBA(p)
	}
	return nil
}

// toRGBA turns BGRX pixels into RGBA in place: red and blue swap places,
// and the alpha byte becomes 255. Two pixels per 64-bit word, four words
// per iteration; Raw decoding is mostly this loop.
func toRGBA(p []byte) {
	le := binary.LittleEndian
	swap := func(v uint64) uint64 {
		const (
			green  = 0x0000ff00_0000ff00
			low    = 0x000000ff_000000ff
			alphas = 0xff000000_ff000000
		)
		return v&green | (v>>16)&low | (v&low)<<16 | alphas
	}
	for len(p) >= 32 {
		q := p[:32:32]
		le.PutUint64(q[0:], swap(le.Uint64(q[0:])))
		le.PutUint64(q[8:], swap(le.Uint64(q[8:])))
		le.PutUint64(q[16:], swap(le.Uint64(q[16:])))
		le.PutUint64(q[24:], swap(le.Uint64(q[24:])))
		p = p[32:]
	}
	for ; len(p) >= 4; p = p[4:] {
		p[0], p[2], p[3] = p[2], p[0], 0xff
	}
}
