package screenshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"image"
	"image/draw"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/flate"
)

// DefaultPNGLevel is the flate level PNGEncoder uses when Level is 0: the
// fastest level that still finds matches, which on desktops (flat areas,
// repeated glyphs) is most of the gain.
const DefaultPNGLevel = flate.BestSpeed

// minPNGBandRows keeps bands big enough that the matches lost at band
// boundaries (each band is compressed on its own) cost little.
const minPNGBandRows = 32

// PNGEncoder writes PNGs fast: it compresses row bands in parallel, each as
// independent flate blocks ending in a sync flush, and joins them into the
// single zlib stream PNG requires (the blocks concatenate; the Adler-32 sums of
// the bands combine). Opaque images are written as 8-bit RGB, others as 8-bit
// RGBA. The zero value is ready to use; an encoder is safe for concurrent use
// and must not be copied after first use.
type PNGEncoder struct {
	// Level is the flate level, 1 (fastest) to 9; 0 means DefaultPNGLevel.
	Level int
	// Bands caps how many row bands are compressed in parallel; 0 means
	// four per available CPU, so uneven bands still keep every CPU busy.
	Bands int

	bands sync.Pool // *pngBand
	// filter is the row filter strategy; tests and benchmarks compare them.
	filter pngFilter
}

// pixelLayout says how rows are converted from the image's 4-byte pixels.
type pixelLayout int

const (
	layoutRGB         pixelLayout = iota // opaque: drop alpha
	layoutRGBA                           // non-premultiplied already (NRGBA)
	layoutUnpremulRGB                    // premultiplied (RGBA) with some alpha < 255
)

// pngSource is an image's pixels as rows of 4 bytes a pixel.
type pngSource struct {
	pix           []byte
	stride        int
	width, height int
	premultiplied bool
}

const pngSignature = "\x89PNG\r\n\x1a\n"

var errPNGSize = errors.New("png: image too large or empty")

// Encode returns img as a PNG appended to dst.
func (e *PNGEncoder) Encode(dst []byte, img image.Image) ([]byte, error) {
	src, err := pngSourceOf(img)
	if err != nil {
		return dst, err
	}
	layout := layoutRGB
	out, opaque, err := e.encode(dst, src, layout)
	if err != nil || opaque {
		return out, err
	}
	// A pixel with alpha below 255 turned up: redo with an alpha channel.
	layout = layoutRGBA
	if src.premultiplied {
		layout = layoutUnpremulRGB
	}
	out, _, err = e.encode(dst, src, layout)
	return out, err
}

func pngSourceOf(img image.Image) (pngSource, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 || w > math.MaxInt32/8 || h > math.MaxInt32 {
		return pngSource{}, fmt.Errorf("%w: %dx%d", errPNGSize, w, h)
	}
	switch m := img.(type) {
	case *image.RGBA:
		return pngSource{pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], stride: m.Stride, width: w, height: h, premultiplied: true}, nil
	case *image.NRGBA:
		return pngSource{pix: m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], stride: m.Stride, width: w, height: h}, nil
	default:
		// Rare here (frames are RGBA, scaled frames NRGBA): convert once.
		n := image.NewNRGBA(image.Rect(0, 0, w, h))
		draw.Draw(n, n.Rect, img, b.Min, draw.Src)
		return pngSource{pix: n.Pix, stride: n.Stride, width: w, height: h}, nil
	}
}

// encode writes the PNG in the given layout. With layoutRGB it reports
// opaque=false, and the output must be discarded, when a pixel was not opaque.
func (e *PNGEncoder) encode(dst []byte, src pngSource, layout pixelLayout) (out []byte, opaque bool, err error) {
	level := e.Level
	if level == 0 {
		level = DefaultPNGLevel
	}
	if level < flate.BestSpeed || level > flate.BestCompression {
		return dst, false, fmt.Errorf("png: flate level %d out of range 1 to 9", level)
	}
	bands := e.split(src.height)
	work := make([]*pngBand, len(bands))
	for i := range work {
		b, err := e.band(level)
		if err != nil {
			return dst, false, err
		}
		work[i] = b
	}
	defer func() {
		for _, b := range work {
			e.bands.Put(b)
		}
	}()

	runParallel(len(bands), func(i int) {
		work[i].encode(src, layout, e.filter, bands[i][0], bands[i][1], i == len(bands)-1)
	})

	sum := work[0].adler
	for i, b := range work {
		if b.err != nil {
			return dst, false, fmt.Errorf("png: compress rows %d to %d: %w", bands[i][0], bands[i][1], b.err)
		}
		if layout == layoutRGB && !b.opaque {
			return dst, false, nil
		}
		if i > 0 {
			sum = adler32Combine(sum, b.adler, b.raw)
		}
	}

	size := len(pngSignature) + 3*12 + 13 + 2 + 4 + 12*(len(work)-1) // chunks' framing and payloads
	for _, b := range work {
		size += b.out.Len()
	}
	dst = slices.Grow(dst, size)

	colorType := byte(2) // truecolour
	if layout != layoutRGB {
		colorType = 6 // truecolour with alpha
	}
	dst = append(dst, pngSignature...)
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(src.width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(src.height))
	ihdr[8] = 8 // bits per sample
	ihdr[9] = colorType
	dst = appendChunk(dst, "IHDR", ihdr[:])

	// One IDAT per band: the zlib header leads the first, the Adler-32 of
	// all filtered rows ends the last.
	for i, b := range work {
		data := b.out.Bytes()
		if len(data) > math.MaxInt32-8 {
			return dst, false, fmt.Errorf("%w: band of %d compressed bytes", errPNGSize, len(data))
		}
		var head, tail []byte
		if i == 0 {
			head = []byte{0x78, 0x01} // deflate, 32 KiB window, fastest
		}
		if i == len(work)-1 {
			tail = binary.BigEndian.AppendUint32(nil, sum)
		}
		dst = appendChunk(dst, "IDAT", head, data, tail)
	}
	dst = appendChunk(dst, "IEND")
	return dst, true, nil
}

// split divides height rows into bands of at least minPNGBandRows rows.
func (e *PNGEncoder) split(height int) [][2]int {
	n := e.Bands
	if n <= 0 {
		n = 4 * runtime.GOMAXPROCS(0)
	}
	n = max(1, min(n, height/minPNGBandRows))
	out := make([][2]int, n)
	for i := range out {
		out[i] = [2]int{height * i / n, height * (i + 1) / n}
	}
	return out
}

func (e *PNGEncoder) band(level int) (*pngBand, error) {
	if b, ok := e.bands.Get().(*pngBand); ok && b.level == level {
		return b, nil
	}
	fw, err := flate.NewWriter(nil, level)
	if err != nil {
		return nil, fmt.Errorf("png: new flate writer: %w", err)
	}
	return &pngBand{fw: fw, level: level}, nil
}

// runParallel calls fn(0) to fn(n-1) on up to GOMAXPROCS goroutines,
// including the caller's, and returns when all are done.
func runParallel(n int, fn func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range next {
		fn(i)
	}
	wg.Wait()
}

func appendChunk(dst []byte, kind string, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	start := len(dst)
	dst = append(dst, kind...)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}

// pngBand compresses one band of rows; pooled with its buffers.
type pngBand struct {
	fw    *flate.Writer
	level int
	out   bytes.Buffer
	// prev and cur hold unfiltered rows; filtered holds one filter byte and
	// a filtered row per candidate filter.
	prev, cur []byte
	filtered  [5][]byte

	adler  uint32 // of this band's filtered bytes
	raw    int    // filtered bytes compressed
	opaque bool
	err    error
}

func (b *pngBand) encode(src pngSource, layout pixelLayout, filter pngFilter, y0, y1 int, last bool) {
	bpp := 3
	if layout != layoutRGB {
		bpp = 4
	}
	rowLen := src.width * bpp
	b.prev = grow(b.prev, rowLen)
	b.cur = grow(b.cur, rowLen)
	for i := range b.filtered {
		b.filtered[i] = grow(b.filtered[i], rowLen+1)
	}
	b.out.Reset()
	b.fw.Reset(&b.out)
	b.err = nil
	b.raw = 0
	alphaAnd := byte(0xff)

	clear(b.prev)
	if y0 > 0 {
		alphaAnd &= convertRow(b.prev, src, y0-1, layout)
	}
	hash := adler32.New()
	for y := y0; y < y1; y++ {
		alphaAnd &= convertRow(b.cur, src, y, layout)
		row := filterRow(&b.filtered, b.cur, b.prev, bpp, filter)
		hash.Write(row)
		if _, err := b.fw.Write(row); err != nil {
			b.err = err
			return
		}
		b.raw += len(row)
		b.prev, b.cur = b.cur, b.prev
	}
	if last {
		b.err = b.fw.Close()
	} else {
		b.err = b.fw.Flush()
	}
	b.adler = hash.Sum32()
	b.opaque = alphaAnd == 0xff
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
