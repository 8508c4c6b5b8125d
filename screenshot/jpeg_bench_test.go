package screenshot

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"testing"

	"github.com/warmdesk/warmdesk/screenshot/screenshottest"
)

func BenchmarkJPEGStdlib(b *testing.B) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}

func BenchmarkJPEG(b *testing.B) {
	img := screenshottest.DesktopFrame(1280, 800, 1)
	for _, bands := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("bands=%d", bands), func(b *testing.B) {
			enc := &JPEGEncoder{Bands: bands}
			var out []byte
			for b.Loop() {
				var err error
				if out, err = enc.Encode(out[:0], img, 80); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes")
		})
	}
}
