package screenshottest

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"math/rand/v2"
)

// DesktopFrame draws a deterministic, desktop-like opaque frame of w by h
// pixels: a flat wallpaper and taskbar, a terminal and a browser-like window
// full of anti-aliased text-like glyphs, a gradient banner and a photo-like
// noisy patch. Encoders behave on it roughly as on a real desktop, which a
// uniform or random test image would not show. seed varies the text.
func DesktopFrame(w, h int, seed uint64) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fill(img, img.Rect, color.RGBA{0x3a, 0x6e, 0xa5, 0xff})

	taskbar := image.Rect(0, h-h/25, w, h)
	fill(img, taskbar, color.RGBA{0xd4, 0xd0, 0xc8, 0xff})
	for x := 4; x+100 < w/2; x += 110 {
		fill(img, image.Rect(x, taskbar.Min.Y+3, x+100, taskbar.Max.Y-3), color.RGBA{0xe8, 0xe6, 0xe0, 0xff})
	}

	glyphs := makeGlyphs(rng, 80)

	term := image.Rect(w/32, h/20, w/32+w/2, h/20+h*11/20)
	window(img, term, color.RGBA{0x10, 0x10, 0x10, 0xff})
	text(img, rng, glyphs, term.Inset(6).Add(image.Pt(0, 24)), color.RGBA{0xd0, 0xd0, 0xd0, 0xff}, color.RGBA{0x10, 0x10, 0x10, 0xff})

	browser := image.Rect(w*7/16, h*3/20, w-w/32, h-h/10)
	window(img, browser, color.RGBA{0xff, 0xff, 0xff, 0xff})
	banner := image.Rect(browser.Min.X+2, browser.Min.Y+26, browser.Max.X-2, browser.Min.Y+26+browser.Dy()/8)
	gradient(img, banner)
	body := image.Rect(browser.Min.X+12, banner.Max.Y+10, browser.Max.X-12, browser.Max.Y-8)
	photo := image.Rect(body.Max.X-body.Dx()*2/5, body.Min.Y, body.Max.X, body.Min.Y+body.Dy()*2/5)
	noisyPhoto(img, rng, photo)
	text(img, rng, glyphs, image.Rect(body.Min.X, body.Min.Y, photo.Min.X-10, body.Max.Y), color.RGBA{0x20, 0x20, 0x20, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff})
	text(img, rng, glyphs, image.Rect(photo.Min.X, photo.Max.Y+10, body.Max.X, body.Max.Y), color.RGBA{0x20, 0x20, 0x60, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff})
	return img
}

const glyphW, glyphH = 8, 15

type glyph [glyphH][glyphW]uint8 // coverage, 0 to 255

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, &image.Uniform{C: c}, image.Point{}, draw.Src)
}

func window(img *image.RGBA, r image.Rectangle, body color.RGBA) {
	fill(img, r, color.RGBA{0x70, 0x70, 0x70, 0xff})
	fill(img, image.Rect(r.Min.X+1, r.Min.Y+1, r.Max.X-1, r.Min.Y+24), color.RGBA{0x24, 0x4a, 0x8c, 0xff})
	fill(img, image.Rect(r.Min.X+2, r.Min.Y+24, r.Max.X-2, r.Max.Y-2), body)
}

// makeGlyphs builds n random glyphs of strokes with anti-aliased edges; text
// reuses them, as real text reuses letters.
func makeGlyphs(rng *rand.Rand, n int) []glyph {
	out := make([]glyph, n)
	for i := range out {
		g := &out[i]
		for range 2 + rng.IntN(3) {
			if rng.IntN(2) == 0 {
				x, y0, y1 := 1+rng.IntN(glyphW-2), 3+rng.IntN(4), 8+rng.IntN(5)
				for y := y0; y < y1; y++ {
					g[y][x] = 255
					g[y][x-1] = max(g[y][x-1], 70)
					g[y][x+1] = max(g[y][x+1], 40)
				}
			} else {
				y, x0, x1 := 3+rng.IntN(10), rng.IntN(3), 4+rng.IntN(glyphW-4)
				for x := x0; x < x1; x++ {
					g[y][x] = 255
					g[y+1][x] = max(g[y+1][x], 90)
				}
			}
		}
	}
	return out
}

func text(img *image.RGBA, rng *rand.Rand, glyphs []glyph, r image.Rectangle, fg, bg color.RGBA) {
	for y := r.Min.Y; y+glyphH <= r.Max.Y; y += glyphH + 3 {
		end := r.Min.X + rng.IntN(max(r.Dx(), 1))
		for x := r.Min.X; x+glyphW <= min(end, r.Max.X); x += glyphW {
			if rng.IntN(6) == 0 {
				continue // a space between words
			}
			drawGlyph(img, &glyphs[rng.IntN(len(glyphs))], x, y, fg, bg)
		}
	}
}

func drawGlyph(img *image.RGBA, g *glyph, x0, y0 int, fg, bg color.RGBA) {
	for y := range glyphH {
		for x := range glyphW {
			a := uint32(g[y][x])
			if a == 0 {
				continue
			}
			mix := func(f, b uint8) uint8 { return uint8((uint32(f)*a + uint32(b)*(255-a)) / 255) }
			img.SetRGBA(x0+x, y0+y, color.RGBA{mix(fg.R, bg.R), mix(fg.G, bg.G), mix(fg.B, bg.B), 0xff})
		}
	}
}

func gradient(img *image.RGBA, r image.Rectangle) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			t := float64(x-r.Min.X) / float64(max(r.Dx(), 1))
			u := float64(y-r.Min.Y) / float64(max(r.Dy(), 1))
			img.SetRGBA(x, y, color.RGBA{uint8(40 + 180*t), uint8(90 + 60*u), uint8(200 - 120*t), 0xff})
		}
	}
}

// noisyPhoto paints smooth shapes plus sensor-like noise: the part of a real
// screen that compresses worst.
func noisyPhoto(img *image.RGBA, rng *rand.Rand, r image.Rectangle) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			fx, fy := float64(x-r.Min.X), float64(y-r.Min.Y)
			base := 110 + 60*math.Sin(fx/23)*math.Cos(fy/17) + 30*math.Sin((fx+fy)/41)
			n := func() uint8 { return uint8(min(max(base+float64(rng.IntN(25)-12), 0), 255)) }
			img.SetRGBA(x, y, color.RGBA{n(), uint8(min(max(base*0.8+float64(rng.IntN(25)-12), 0), 255)), n() / 2, 0xff})
		}
	}
}
