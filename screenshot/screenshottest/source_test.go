package screenshottest

import (
	"bytes"
	"image"
	"image/color"
	"testing"
)

func TestSourceSignalsChanges(t *testing.T) {
	src := NewSource(DesktopFrame(40, 30, 1))
	c0, ch := src.Changed()
	select {
	case <-ch:
		t.Fatal("changed channel closed before any change")
	default:
	}
	c1 := src.Fill(image.Rect(0, 0, 5, 5), &image.Uniform{C: color.RGBA{1, 2, 3, 255}})
	select {
	case <-ch:
	default:
		t.Fatal("changed channel still open after a change")
	}
	if c1 != c0+1 {
		t.Errorf("counter %d after one change from %d", c1, c0)
	}
	frame, counter := src.Frame(nil)
	if counter != c1 || frame.RGBAAt(2, 2) != (color.RGBA{1, 2, 3, 255}) {
		t.Errorf("Frame = counter %d pixel %v, want %d and the filled colour", counter, frame.RGBAAt(2, 2), c1)
	}
	// The copy is the caller's: changing it leaves the source alone.
	frame.SetRGBA(2, 2, color.RGBA{})
	if again, _ := src.Frame(frame); again.RGBAAt(2, 2) != (color.RGBA{1, 2, 3, 255}) {
		t.Error("a caller's change to its copy reached the source")
	}
	if src.FrameCalls() != 2 {
		t.Errorf("FrameCalls = %d, want 2", src.FrameCalls())
	}
}

func TestDesktopFrameIsDeterministicAndOpaque(t *testing.T) {
	a, b := DesktopFrame(320, 200, 7), DesktopFrame(320, 200, 7)
	if !bytes.Equal(a.Pix, b.Pix) {
		t.Error("the same seed drew different frames")
	}
	if bytes.Equal(a.Pix, DesktopFrame(320, 200, 8).Pix) {
		t.Error("another seed drew the same frame")
	}
	if !a.Opaque() {
		t.Error("frame is not opaque")
	}
	for _, size := range []image.Point{{1, 1}, {3, 500}, {500, 3}} {
		if got := DesktopFrame(size.X, size.Y, 1).Rect.Size(); got != size {
			t.Errorf("DesktopFrame(%v) is %v", size, got)
		}
	}
}
