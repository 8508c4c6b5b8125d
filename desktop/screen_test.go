package desktop_test

import (
	"image"
	"image/color"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

func TestBlankScreen(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	if !desktop.BlankScreen(img) || !desktop.BlankScreen(image.NewRGBA(image.Rect(0, 0, 0, 0))) {
		t.Fatal("a one-colour and an empty picture are blank")
	}
	img.Set(30, 21, color.White)
	if desktop.BlankScreen(img) {
		t.Fatal("a picture with a pixel drawn on the sampled grid is not blank")
	}
}
