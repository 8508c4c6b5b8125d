// Package screenshot captures pictures of a live framebuffer: PNG and JPEG
// encodings cached per change, crops and scaling for models, the mapping of
// coordinates between a scaled picture and the native screen, and waiting for
// the screen to settle or change.
package screenshot

import "image"

// Source is a live framebuffer that changes over time. vnc.Mirror implements it;
// tests use an in-memory fake.
type Source interface {
	// Frame copies the current framebuffer into dst, reallocating it when dst
	// is nil or of another size, and returns it with the change counter of the
	// copied content. The counter increases whenever the framebuffer changes.
	// Pixels should be opaque (alpha 255): a screen has no transparency, and
	// the PNG encoder writes RGB only when every pixel is opaque.
	Frame(dst *image.RGBA) (*image.RGBA, uint64)
	// Changed returns the current change counter and a channel that is closed
	// at the next change after it.
	Changed() (uint64, <-chan struct{})
	// Poke asks the server to look for changes promptly (QEMU slows its
	// refresh when idle). Cheap and safe to call often; callers waiting for a
	// change call it periodically.
	Poke()
	// Cursor returns the pointer image and its hotspot when the server sent
	// one (RFB Cursor pseudo-encoding); ok is false otherwise, in which case
	// the guest draws the cursor into the framebuffer itself. The image must
	// not be modified once returned (a new shape is a new image): captures
	// hash it into their cache key and draw it without locking.
	Cursor() (img *image.RGBA, hotspot image.Point, ok bool)
}
