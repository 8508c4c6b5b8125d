package desktop

import "image"

// BlankScreen reports whether a picture of a screen is one colour: nothing
// drawn yet (a restore not painted, a guest not started), or no picture at
// all. Every pixel counts (a single one drawn is a picture); alpha does not.
func BlankScreen(img image.Image) bool {
	b := img.Bounds()
	if b.Empty() {
		return true
	}
	if rgba, ok := img.(*image.RGBA); ok {
		return blankRGBA(rgba)
	}
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}

// blankRGBA is BlankScreen on the pixels themselves: the screen mirrors'
// frames are RGBA, and a wait for a first frame checks each one.
func blankRGBA(img *image.RGBA) bool {
	b := img.Bounds()
	first := img.PixOffset(b.Min.X, b.Min.Y)
	r0, g0, b0 := img.Pix[first], img.Pix[first+1], img.Pix[first+2]
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y) : img.PixOffset(b.Min.X, y)+4*b.Dx()]
		for i := 0; i < len(row); i += 4 {
			if row[i] != r0 || row[i+1] != g0 || row[i+2] != b0 {
				return false
			}
		}
	}
	return true
}
