package screenshot

import (
	"bytes"
	"fmt"
	"hash/adler32"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

// decodeNRGBA decodes a PNG with the standard library, the reference reader.
func decodeNRGBA(t testing.TB, data []byte) *image.NRGBA {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("image/png cannot decode our PNG: %v", err)
	}
	return wantNRGBA(img)
}

// wantNRGBA converts img to an NRGBA at the origin, as a lossless encoding
// must decode; the common types take a fast path (tests run with -race).
func wantNRGBA(img image.Image) *image.NRGBA {
	b := img.Bounds()
	out := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	switch m := img.(type) {
	case *image.NRGBA:
		for y := range b.Dy() {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			copy(out.Pix[y*out.Stride:], m.Pix[i:i+4*b.Dx()])
		}
	case *image.RGBA:
		for y := range b.Dy() {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			row := m.Pix[i : i+4*b.Dx()]
			copy(out.Pix[y*out.Stride:], row)
			for x := 0; x < len(row); x += 4 {
				if a := row[x+3]; a != 0xff {
					c := color.NRGBAModel.Convert(color.RGBA{row[x], row[x+1], row[x+2], a}).(color.NRGBA)
					o := out.Pix[y*out.Stride+x:]
					o[0], o[1], o[2], o[3] = c.R, c.G, c.B, c.A
				}
			}
		}
	default:
		draw.Draw(out, out.Rect, img, b.Min, draw.Src)
	}
	return out
}

func assertSamePixels(t testing.TB, got, want *image.NRGBA) {
	t.Helper()
	if got.Rect.Size() != want.Rect.Size() {
		t.Fatalf("decoded size %v, want %v", got.Rect.Size(), want.Rect.Size())
	}
	if bytes.Equal(got.Pix, want.Pix) {
		return
	}
	for y := range want.Rect.Dy() {
		for x := range want.Rect.Dx() {
			if g, w := got.NRGBAAt(x, y), want.NRGBAAt(x, y); g != w {
				t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, g, w)
			}
		}
	}
}

func noisyRGBA(w, h int, seed uint64, opaque bool) *image.RGBA {
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		a := uint8(255)
		if !opaque {
			a = uint8(rng.IntN(256))
		}
		// Premultiplied: colour channels never exceed alpha.
		img.Pix[i] = uint8(rng.IntN(int(a) + 1))
		img.Pix[i+1] = uint8(rng.IntN(int(a) + 1))
		img.Pix[i+2] = uint8(rng.IntN(int(a) + 1))
		img.Pix[i+3] = a
	}
	return img
}

func TestPNGRoundTrip(t *testing.T) {
	desktop := screenshottest.DesktopFrame(640, 400, 1)
	translucent := noisyRGBA(67, 45, 2, false)
	nrgba := image.NewNRGBA(image.Rect(0, 0, 33, 70))
	for i := range nrgba.Pix {
		nrgba.Pix[i] = uint8(i * 7)
	}
	gray := image.NewGray(image.Rect(0, 0, 40, 40))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i)
	}
	tests := []struct {
		name      string
		img       image.Image
		colorType byte
	}{
		{"desktop", desktop, 2},
		{"desktop crop at odd offset", desktop.SubImage(image.Rect(301, 77, 603, 311)), 2},
		{"one pixel", desktop.SubImage(image.Rect(5, 5, 6, 6)), 2},
		{"one row", desktop.SubImage(image.Rect(0, 100, 640, 101)), 2},
		{"one column", desktop.SubImage(image.Rect(500, 0, 501, 400)), 2},
		{"opaque noise", noisyRGBA(129, 257, 3, true), 2},
		{"translucent RGBA", translucent, 6},
		{"NRGBA with alpha", nrgba, 6},
		{"gray converted", gray, 2},
	}
	filters := map[string]pngFilter{"up": filterUp, "none": filterNone, "sub": filterSub, "paeth": filterPaeth, "adaptive": filterAdaptive}
	for _, tt := range tests {
		for fname, f := range filters {
			for _, bands := range []int{0, 1, 3, 64} {
				t.Run(fmt.Sprintf("%s/%s/bands=%d", tt.name, fname, bands), func(t *testing.T) {
					enc := &PNGEncoder{Bands: bands, filter: f}
					data, err := enc.Encode(nil, tt.img)
					if err != nil {
						t.Fatal(err)
					}
					if got := data[25]; got != tt.colorType {
						t.Errorf("colour type %d, want %d", got, tt.colorType)
					}
					assertSamePixels(t, decodeNRGBA(t, data), wantNRGBA(tt.img))
				})
			}
		}
	}
}

func TestPNGFullScreenDefaults(t *testing.T) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	data, err := (&PNGEncoder{}).Encode(nil, img)
	if err != nil {
		t.Fatal(err)
	}
	assertSamePixels(t, decodeNRGBA(t, data), wantNRGBA(img))
}

func TestPNGEncoderReuseAcrossSizesAndLevels(t *testing.T) {
	enc := &PNGEncoder{}
	for i, size := range []image.Point{{1280, 800}, {64, 64}, {1024, 640}, {3, 700}} {
		enc.Level = 1 + i*2
		img := screenshottest.DesktopFrame(size.X, size.Y, uint64(i))
		data, err := enc.Encode([]byte("prefix"), img)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("prefix\x89PNG")) {
			t.Fatalf("Encode did not append to dst: % x", data[:12])
		}
		assertSamePixels(t, decodeNRGBA(t, data[len("prefix"):]), wantNRGBA(img))
	}
}

func TestPNGRejectsBadInput(t *testing.T) {
	if _, err := (&PNGEncoder{}).Encode(nil, image.NewRGBA(image.Rect(0, 0, 0, 10))); err == nil {
		t.Error("empty image encoded without error")
	}
	if _, err := (&PNGEncoder{Level: 10}).Encode(nil, image.NewRGBA(image.Rect(0, 0, 4, 4))); err == nil {
		t.Error("level 10 accepted")
	}
}

func TestPNGMatchesStandardLibraryOnOpaqueColours(t *testing.T) {
	// Both must decode to identical pixels; sizes differ by design.
	img := screenshottest.DesktopFrame(320, 200, 9)
	var std bytes.Buffer
	if err := png.Encode(&std, img); err != nil {
		t.Fatal(err)
	}
	ours, err := (&PNGEncoder{}).Encode(nil, img)
	if err != nil {
		t.Fatal(err)
	}
	assertSamePixels(t, decodeNRGBA(t, ours), decodeNRGBA(t, std.Bytes()))
}

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for range 60 {
		data := make([]byte, rng.IntN(200000))
		for i := range data {
			data[i] = uint8(rng.IntN(256))
		}
		cut := 0
		if len(data) > 0 {
			cut = rng.IntN(len(data) + 1)
		}
		a, b := data[:cut], data[cut:]
		if got, want := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), len(b)), adler32.Checksum(data); got != want {
			t.Fatalf("combine at %d of %d = %08x, want %08x", cut, len(data), got, want)
		}
	}
}

func FuzzPNGRoundTrip(f *testing.F) {
	f.Add(uint16(1), uint16(1), uint8(0), uint8(0), []byte{1, 2, 3, 255})
	f.Add(uint16(70), uint16(90), uint8(3), uint8(4), []byte("desktop"))
	f.Add(uint16(5), uint16(200), uint8(1), uint8(2), []byte{0, 0, 0, 0, 9, 9, 9, 128})
	f.Fuzz(func(t *testing.T, w, h uint16, bands, filter uint8, seed []byte) {
		w, h = w%300+1, h%300+1
		img := image.NewRGBA(image.Rect(0, 0, int(w), int(h)))
		for i := range img.Pix {
			if len(seed) > 0 {
				img.Pix[i] = seed[(i*31+i/len(seed))%len(seed)]
			}
		}
		// Keep it premultiplied: a colour above its alpha is not a colour.
		for i := 0; i < len(img.Pix); i += 4 {
			a := img.Pix[i+3]
			img.Pix[i], img.Pix[i+1], img.Pix[i+2] = min(img.Pix[i], a), min(img.Pix[i+1], a), min(img.Pix[i+2], a)
		}
		enc := &PNGEncoder{Bands: int(bands % 16), filter: pngFilter(filter % 5)}
		data, err := enc.Encode(nil, img)
		if err != nil {
			t.Fatal(err)
		}
		assertSamePixels(t, decodeNRGBA(t, data), wantNRGBA(img))
	})
}
