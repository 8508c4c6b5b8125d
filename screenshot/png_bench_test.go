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

func BenchmarkPNG(b *testing.B) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	filters := []struct {
		name string
		f    pngFilter
	}{{"up", filterUp}, {"none", filterNone}, {"sub", filterSub}, {"paeth", filterPaeth}, {"adaptive", filterAdaptive}}
	for _, f := range filters {
		for _, level := range []int{1, 2, 3} {
			for _, bands := range []int{1, 2, 8} {
				b.Run(fmt.Sprintf("filter=%s/level=%d/bands=%d", f.name, level, bands), func(b *testing.B) {
					enc := &PNGEncoder{Level: level, Bands: bands, filter: f.f}
					var out []byte
					for b.Loop() {
						var err error
						if out, err = enc.Encode(out[:0], img); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(out)), "bytes")
				})
			}
		}
	}
}
