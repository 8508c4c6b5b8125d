package desktop_test

import (
	"image"
	"image/color"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

// One pixel anywhere, on the RGBA fast path and on any other image type,
// is a picture; a one-colour or empty one is blank.
func TestBlankScreen(t *testing.T) {
	for _, at := range []image.Point{{10, 10}, {1, 1}, {63, 39}} {
		rgba := image.NewRGBA(image.Rect(0, 0, 64, 40))
		gray := image.NewGray(image.Rect(0, 0, 64, 40))
		if !desktop.BlankScreen(rgba) || !desktop.BlankScreen(gray) {
			t.Fatal("a one-colour picture is blank")
		}
		rgba.Set(at.X, at.Y, color.White)
		gray.Set(at.X, at.Y, color.White)
		if desktop.BlankScreen(rgba) || desktop.BlankScreen(gray) {
			t.Errorf("a pixel drawn at %v: read as blank", at)
		}
	}
	sub := image.NewRGBA(image.Rect(0, 0, 64, 40))
	sub.Set(5, 5, color.White)
	if !desktop.BlankScreen(sub.SubImage(image.Rect(10, 10, 30, 30))) {
		t.Error("a sub-image without the pixel read as a picture")
	}
	if !desktop.BlankScreen(image.NewRGBA(image.Rect(0, 0, 0, 0))) {
		t.Error("an empty picture is blank")
	}
}
