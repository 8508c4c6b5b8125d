package desktop

import "image"

// BlankScreen reports whether a picture of a screen is one colour: nothing
// drawn yet (a restore not painted, a guest not started), or no picture at
// all. It looks at every third pixel each way, which finds any window,
// text or pointer.
func BlankScreen(img image.Image) bool {
	b := img.Bounds()
	if b.Empty() {
		return true
	}
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}
