package screenshot

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"testing"

	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

func decodeJPEG(t testing.TB, data []byte) image.Image {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("image/jpeg cannot decode: %v", err)
	}
	return img
}

// assertSameDecode checks that two JPEGs decode to identical pixels: the
// same planes, since image/jpeg decodes colour to YCbCr.
func assertSameDecode(t testing.TB, got, want []byte) {
	t.Helper()
	g, w := decodeJPEG(t, got), decodeJPEG(t, want)
	gy, ok1 := g.(*image.YCbCr)
	wy, ok2 := w.(*image.YCbCr)
	if !ok1 || !ok2 {
		assertSamePixels(t, wantNRGBA(g), wantNRGBA(w))
		return
	}
	if gy.Rect != wy.Rect || gy.SubsampleRatio != wy.SubsampleRatio {
		t.Fatalf("decoded %v %v, want %v %v", gy.Rect, gy.SubsampleRatio, wy.Rect, wy.SubsampleRatio)
	}
	for y := gy.Rect.Min.Y; y < gy.Rect.Max.Y; y++ {
		for x := gy.Rect.Min.X; x < gy.Rect.Max.X; x++ {
			if gy.Y[gy.YOffset(x, y)] != wy.Y[wy.YOffset(x, y)] || gy.Cb[gy.COffset(x, y)] != wy.Cb[wy.COffset(x, y)] || gy.Cr[gy.COffset(x, y)] != wy.Cr[wy.COffset(x, y)] {
				t.Fatalf("pixel (%d,%d) decodes differently", x, y)
			}
		}
	}
}

func TestJPEGBandsDecodeLikeOneEncode(t *testing.T) {
	desktop := screenshottest.DesktopFrame(640, 400, 1)
	opaqueN := image.NewNRGBA(image.Rect(0, 0, 203, 301))
	draw.Draw(opaqueN, opaqueN.Rect, desktop, image.Pt(400, 300), draw.Src)
	translucentN := image.NewNRGBA(image.Rect(0, 0, 100, 130))
	for i := range translucentN.Pix {
		translucentN.Pix[i] = uint8(i * 13)
	}
	tests := []struct {
		name string
		img  image.Image
	}{
		{"desktop", desktop},
		{"odd crop", desktop.SubImage(image.Rect(13, 7, 601, 387))},
		{"height not a multiple of 16", desktop.SubImage(image.Rect(0, 0, 640, 133))},
		{"short", desktop.SubImage(image.Rect(0, 0, 640, 20))},
		{"tall: restart markers wrap past RST7", screenshottest.DesktopFrame(96, 1500, 4)},
		{"opaque NRGBA", opaqueN},
		{"translucent NRGBA", translucentN},
		{"gray, one piece", image.NewGray(image.Rect(0, 0, 64, 200))},
	}
	for _, tt := range tests {
		for _, quality := range []int{1, 80, 100} {
			for _, bands := range []int{0, 3, 100} {
				t.Run(fmt.Sprintf("%s/q=%d/bands=%d", tt.name, quality, bands), func(t *testing.T) {
					got, err := (&JPEGEncoder{Bands: bands}).Encode(nil, tt.img, quality)
					if err != nil {
						t.Fatal(err)
					}
					var want bytes.Buffer
					if err := jpeg.Encode(&want, tt.img, &jpeg.Options{Quality: quality}); err != nil {
						t.Fatal(err)
					}
					assertSameDecode(t, got, want.Bytes())
				})
			}
		}
	}
}

func TestJPEGUsesRestartMarkersWhenBanded(t *testing.T) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	data, err := (&JPEGEncoder{Bands: 4}).Encode([]byte("x"), img, 80)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 'x' {
		t.Fatal("Encode did not append to dst")
	}
	if !bytes.Contains(data, []byte{0xff, markerDRI, 0, 4}) {
		t.Error("no DRI segment in a banded encode")
	}
	for i := range 3 {
		if !bytes.Contains(data, []byte{0xff, markerRST0 + byte(i)}) {
			t.Errorf("no RST%d marker", i)
		}
	}
	var want bytes.Buffer
	if err := jpeg.Encode(&want, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	assertSameDecode(t, data[1:], want.Bytes())
}

func TestJPEGRejectsBadInput(t *testing.T) {
	enc := &JPEGEncoder{}
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for _, q := range []int{-1, 101} {
		if _, err := enc.Encode(nil, img, q); err == nil {
			t.Errorf("quality %d accepted", q)
		}
	}
	if _, err := enc.Encode(nil, image.NewRGBA(image.Rect(0, 0, 0, 8)), 80); err == nil {
		t.Error("empty image accepted")
	}
}

func TestSplitJPEGRejectsGarbage(t *testing.T) {
	for _, data := range [][]byte{nil, {0xff, 0xd8}, []byte("not a jpeg at all"), {0xff, 0xd8, 0xff, 0xc0, 0x00, 0x40, 0xff, 0xd9},
		// Found by FuzzSplitJPEG: a SOF0 too short to hold the height it is
		// said to hold, which joinJPEGBands would write past the header.
		[]byte("\xff\xd8\xff\xc0\x00\x02\xff\xda\x00\x02\xff\xd9")} {
		if _, err := splitJPEG(data); err == nil {
			t.Errorf("splitJPEG(% x) accepted garbage", data)
		}
	}
}

func FuzzSplitJPEG(f *testing.F) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, screenshottest.DesktopFrame(32, 32, 1), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{0xff, 0xd8, 0xff, 0xda, 0x00, 0x02, 0xff, 0xd9})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := splitJPEG(data)
		if err != nil {
			return
		}
		if len(p.header)+len(p.sos)+len(p.scan)+2 != len(data) || p.sofHeight+2 > len(p.header) {
			t.Fatalf("parts do not tile the input: %d+%d+%d+2 != %d, SOF at %d", len(p.header), len(p.sos), len(p.scan), len(data), p.sofHeight)
		}
	})
}

func FuzzJPEGBands(f *testing.F) {
	f.Add(uint16(64), uint16(64), uint8(80), uint8(2), uint64(1))
	f.Add(uint16(17), uint16(250), uint8(1), uint8(7), uint64(2))
	f.Fuzz(func(t *testing.T, w, h uint16, quality, bands uint8, seed uint64) {
		w, h = w%300+1, h%1200+1
		q := int(quality%100) + 1
		img := screenshottest.DesktopFrame(int(w), int(h), seed)
		got, err := (&JPEGEncoder{Bands: int(bands % 9)}).Encode(nil, img, q)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := jpeg.Encode(&want, img, &jpeg.Options{Quality: q}); err != nil {
			t.Fatal(err)
		}
		assertSameDecode(t, got, want.Bytes())
	})
}
