package screenshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"runtime"
	"slices"
	"sync"
)

// DefaultJPEGQuality is the quality used when none is asked for: text stays
// readable for models at about a third of the PNG size of a busy screen.
const DefaultJPEGQuality = 80

// jpegMCU is the height of a row of minimum coded units: image/jpeg always
// writes colour as 4:2:0, whose units are 16 by 16 pixels.
const jpegMCU = 16

// minJPEGBandMCURows keeps bands large enough that their headers, encoded and
// thrown away, cost nothing noticeable.
const minJPEGBandMCURows = 4

// JPEGEncoder writes baseline JPEGs with image/jpeg, in parallel: it encodes
// bands of whole MCU rows as separate JPEGs and joins their entropy-coded
// data with restart markers into one image (a restart resets the DC
// predictors, exactly as starting a new image does). The pixels decode
// identically to a single image/jpeg encode. The zero value is ready to use;
// safe for concurrent use, not to be copied after first use.
type JPEGEncoder struct {
	// Bands caps how many bands are encoded in parallel; 0 means two per
	// available CPU.
	Bands int

	bufs sync.Pool // *bytes.Buffer
}

var errJPEGJoin = errors.New("jpeg: cannot join band encodings")

// Encode returns img as a JPEG of the given quality (1 to 100; 0 means
// DefaultJPEGQuality) appended to dst. Alpha is ignored, as image/jpeg does.
func (e *JPEGEncoder) Encode(dst []byte, img image.Image, quality int) ([]byte, error) {
	if quality == 0 {
		quality = DefaultJPEGQuality
	}
	if quality < 1 || quality > 100 {
		return dst, fmt.Errorf("jpeg: quality %d out of range 1 to 100", quality)
	}
	b := img.Bounds()
	if b.Empty() || b.Dx() >= 1<<16 || b.Dy() >= 1<<16 {
		return dst, fmt.Errorf("jpeg: cannot encode a %dx%d image", b.Dx(), b.Dy())
	}
	rgba := asRGBA(img)
	opts := &jpeg.Options{Quality: quality}
	bands := e.split(b)
	if rgba == nil || len(bands) == 1 {
		buf := e.buf()
		defer e.bufs.Put(buf)
		if err := jpeg.Encode(buf, img, opts); err != nil {
			return dst, fmt.Errorf("jpeg: encode: %w", err)
		}
		return append(dst, buf.Bytes()...), nil
	}

	bufs := make([]*bytes.Buffer, len(bands))
	errs := make([]error, len(bands))
	for i := range bufs {
		bufs[i] = e.buf()
	}
	defer func() {
		for _, buf := range bufs {
			e.bufs.Put(buf)
		}
	}()
	runParallel(len(bands), func(i int) {
		errs[i] = jpeg.Encode(bufs[i], rgba.SubImage(bands[i]), opts)
	})
	if err := errors.Join(errs...); err != nil {
		return dst, fmt.Errorf("jpeg: encode band: %w", err)
	}
	encoded := make([][]byte, len(bufs))
	for i, buf := range bufs {
		encoded[i] = buf.Bytes()
	}
	mcusPerBand := ((b.Dx() + jpegMCU - 1) / jpegMCU) * (bands[0].Dy() / jpegMCU)
	return joinJPEGBands(dst, encoded, b.Dy(), mcusPerBand)
}

func (e *JPEGEncoder) buf() *bytes.Buffer {
	if b, ok := e.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// split divides b into bands of whole MCU rows, the last one taking the rest.
// It returns one band when the restart interval would not fit its 16 bits.
func (e *JPEGEncoder) split(b image.Rectangle) []image.Rectangle {
	n := e.Bands
	if n <= 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	mcuRows := (b.Dy() + jpegMCU - 1) / jpegMCU
	n = max(1, min(n, mcuRows/minJPEGBandMCURows))
	rowsPerBand := (mcuRows + n - 1) / n
	mcusPerRow := (b.Dx() + jpegMCU - 1) / jpegMCU
	if n == 1 || mcusPerRow*rowsPerBand > 0xffff {
		return []image.Rectangle{b}
	}
	var out []image.Rectangle
	for y := b.Min.Y; y < b.Max.Y; y += rowsPerBand * jpegMCU {
		out = append(out, image.Rect(b.Min.X, y, b.Max.X, min(y+rowsPerBand*jpegMCU, b.Max.Y)))
	}
	return out
}

// asRGBA returns img as an *image.RGBA without copying when it is one, or an
// opaque NRGBA (the same bytes); it converts other NRGBAs, and returns nil
// for other types, which are encoded in one piece.
func asRGBA(img image.Image) *image.RGBA {
	switch m := img.(type) {
	case *image.RGBA:
		return m
	case *image.NRGBA:
		if m.Opaque() {
			return &image.RGBA{Pix: m.Pix, Stride: m.Stride, Rect: m.Rect}
		}
		out := image.NewRGBA(m.Rect)
		draw.Draw(out, out.Rect, m, m.Rect.Min, draw.Src)
		return out
	}
	return nil
}

// jpegParts are the pieces of one image/jpeg output.
type jpegParts struct {
	header    []byte // SOI up to, not including, SOS
	sofHeight int    // offset in header of SOF0's 16-bit height
	sos       []byte // the SOS segment
	scan      []byte // entropy-coded data, byte-aligned, up to EOI
}

// JPEG markers (ITU T.81, table B.1).
const (
	markerSOI  = 0xd8
	markerEOI  = 0xd9
	markerSOF0 = 0xc0
	markerSOS  = 0xda
	markerDRI  = 0xdd
	markerRST0 = 0xd0
)

func splitJPEG(data []byte) (jpegParts, error) {
	var p jpegParts
	if len(data) < 4 || data[0] != 0xff || data[1] != markerSOI {
		return p, fmt.Errorf("%w: no SOI", errJPEGJoin)
	}
	if data[len(data)-2] != 0xff || data[len(data)-1] != markerEOI {
		return p, fmt.Errorf("%w: no EOI", errJPEGJoin)
	}
	p.sofHeight = -1
	for pos := 2; pos+4 <= len(data); {
		if data[pos] != 0xff {
			return p, fmt.Errorf("%w: no marker at byte %d", errJPEGJoin, pos)
		}
		marker := data[pos+1]
		end := pos + 2 + int(binary.BigEndian.Uint16(data[pos+2:]))
		if end > len(data)-2 {
			return p, fmt.Errorf("%w: segment %#x overruns the data", errJPEGJoin, marker)
		}
		switch marker {
		case markerSOF0:
			// Length, precision, height, width and the component
			// count at least: the height is rewritten in place.
			if end < pos+2+8 {
				return p, fmt.Errorf("%w: SOF0 of %d bytes is too short", errJPEGJoin, end-pos-2)
			}
			p.sofHeight = pos + 5
		case markerSOS:
			if p.sofHeight < 0 {
				return p, fmt.Errorf("%w: SOS before SOF0", errJPEGJoin)
			}
			p.header, p.sos, p.scan = data[:pos], data[pos:end], data[end:len(data)-2]
			return p, nil
		}
		pos = end
	}
	return p, fmt.Errorf("%w: no SOS", errJPEGJoin)
}

// joinJPEGBands writes one JPEG of the given height from band encodings of
// the same width, quality and type, each band but the last mcusPerBand MCUs.
func joinJPEGBands(dst []byte, bands [][]byte, height, mcusPerBand int) ([]byte, error) {
	first, err := splitJPEG(bands[0])
	if err != nil {
		return dst, err
	}
	size := len(first.header) + 6 + len(first.sos) + 2
	for _, b := range bands {
		size += len(b) // scans plus their markers, within each band's headers
	}
	out := append(slices.Grow(dst, size), first.header...)
	binary.BigEndian.PutUint16(out[len(dst)+first.sofHeight:], uint16(height))
	out = append(out, 0xff, markerDRI, 0, 4)
	out = binary.BigEndian.AppendUint16(out, uint16(mcusPerBand))
	out = append(out, first.sos...)
	out = append(out, first.scan...)
	for i, band := range bands[1:] {
		p, err := splitJPEG(band)
		if err != nil {
			return dst, err
		}
		// Same tables, same SOS: only SOF0's height may differ.
		if len(p.header) != len(first.header) || !bytes.Equal(p.header[:p.sofHeight], first.header[:first.sofHeight]) ||
			!bytes.Equal(p.header[p.sofHeight+2:], first.header[first.sofHeight+2:]) || !bytes.Equal(p.sos, first.sos) {
			return dst, fmt.Errorf("%w: band %d has other tables", errJPEGJoin, i+1)
		}
		out = append(out, 0xff, markerRST0+byte(i%8))
		out = append(out, p.scan...)
	}
	return append(out, 0xff, markerEOI), nil
}
