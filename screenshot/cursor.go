package screenshot

import (
	"encoding/binary"
	"hash/maphash"
	"image"
	"image/draw"
)

// cursorImage is the pointer shape a capture draws, with a hash that puts
// the shape in the cache key: a new shape is a new picture even when the
// framebuffer did not change.
type cursorImage struct {
	img     *image.RGBA
	hotspot image.Point
	sig     uint64
}

func cursorOf(src Source, seed maphash.Seed) cursorImage {
	img, hotspot, ok := src.Cursor()
	if !ok || img == nil || img.Rect.Empty() {
		return cursorImage{}
	}
	var h maphash.Hash
	h.SetSeed(seed)
	var meta [48]byte
	for i, v := range []int{hotspot.X, hotspot.Y, img.Rect.Min.X, img.Rect.Min.Y, img.Rect.Max.X, img.Rect.Max.Y} {
		binary.LittleEndian.PutUint64(meta[i*8:], uint64(v))
	}
	h.Write(meta[:])
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		i := img.PixOffset(img.Rect.Min.X, y)
		h.Write(img.Pix[i : i+img.Rect.Dx()*4])
	}
	// Zero means "no cursor" in the key; a real hash of zero is just as
	// unlikely as any collision.
	return cursorImage{img: img, hotspot: hotspot, sig: h.Sum64() | 1}
}

// rect is where the cursor covers the framebuffer with the pointer at pos.
func (c cursorImage) rect(pos image.Point) image.Rectangle {
	return c.img.Rect.Sub(c.img.Rect.Min).Add(pos.Sub(c.hotspot))
}

// drawOn composites the cursor over frame with its hotspot at pos and reports
// whether any of it landed inside visible.
func (c cursorImage) drawOn(frame *image.RGBA, pos image.Point, visible image.Rectangle) bool {
	if c.img == nil {
		return false
	}
	r := c.rect(pos).Intersect(visible)
	if r.Empty() {
		return false
	}
	draw.Draw(frame, r, c.img, c.img.Rect.Min.Add(r.Min.Sub(c.rect(pos).Min)), draw.Over)
	return true
}
