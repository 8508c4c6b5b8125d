package screenshot

import (
	"bytes"
	"fmt"
	"image/png"
	"testing"

	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

func BenchmarkPNGStdlibBestSpeed(b *testing.B) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	enc := &png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngBufferPool{}}
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(&buf, img); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}

type pngBufferPool struct{ b *png.EncoderBuffer }

func (p *pngBufferPool) Get() *png.EncoderBuffer  { return p.b }
func (p *pngBufferPool) Put(b *png.EncoderBuffer) { p.b = b }

func benchPNG(b *testing.B, enc *PNGEncoder) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	var out []byte
	for b.Loop() {
		var err error
		if out, err = enc.Encode(out[:0], img); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out)), "bytes")
}

func BenchmarkPNGFilters(b *testing.B) {
	for _, f := range []struct {
		name string
		f    pngFilter
	}{{"up", filterUp}, {"none", filterNone}, {"sub", filterSub}, {"paeth", filterPaeth}, {"adaptive", filterAdaptive}} {
		b.Run(f.name, func(b *testing.B) { benchPNG(b, &PNGEncoder{filter: f.f}) })
	}
}

func BenchmarkPNGLevels(b *testing.B) {
	for _, level := range []int{1, 2, 3, 6} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) { benchPNG(b, &PNGEncoder{Level: level}) })
	}
}

func BenchmarkPNGBands(b *testing.B) {
	for _, bands := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("bands=%d", bands), func(b *testing.B) { benchPNG(b, &PNGEncoder{Bands: bands}) })
	}
}
