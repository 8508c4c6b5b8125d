package screenshot

import "image/color"

// pngFilter names a row filter strategy.
type pngFilter int

const (
	// filterUp predicts each byte from the one above: flat areas, vertical
	// edges and repeated rows become zero runs, at the cost of one
	// subtraction a byte. It is the default. Measured on the 1280x800 test
	// desktop (BenchmarkPNGFilters): Up 166 KB in about 4 ms, Sub 170 KB
	// about the same, Paeth 159 KB in 10 to 14 ms, adaptive 160 KB in
	// about 40 ms, none 240 KB in about 3.3 ms.
	filterUp pngFilter = iota
	filterNone
	filterSub
	filterPaeth
	// filterAdaptive picks per row the filter with the smallest sum of
	// absolute values (libpng's heuristic) among Sub, Up and Paeth.
	filterAdaptive
)

// PNG filter type bytes (PNG specification, section 9.2).
const (
	ftNone  = 0
	ftSub   = 1
	ftUp    = 2
	ftAvg   = 3
	ftPaeth = 4
)

// convertRow writes row y of src into dst in the layout and returns the AND
// of the row's alpha bytes, so callers learn whether it was opaque.
func convertRow(dst []byte, src pngSource, y int, layout pixelLayout) byte {
	s := src.pix[y*src.stride : y*src.stride+src.width*4]
	alpha := byte(0xff)
	switch layout {
	case layoutRGB:
		for i, j := 0, 0; i+3 < len(s); i, j = i+4, j+3 {
			p := s[i : i+4 : i+4]
			d := dst[j : j+3 : j+3]
			d[0], d[1], d[2] = p[0], p[1], p[2]
			alpha &= p[3]
		}
	case layoutRGBA:
		copy(dst, s)
	case layoutUnpremulRGB:
		for i := 0; i+3 < len(s); i += 4 {
			c := color.NRGBAModel.Convert(color.RGBA{s[i], s[i+1], s[i+2], s[i+3]}).(color.NRGBA)
			dst[i], dst[i+1], dst[i+2], dst[i+3] = c.R, c.G, c.B, c.A
		}
	}
	return alpha
}

// filterRow filters cur (with prev the unfiltered row above, zero for the
// first row) and returns the filter type byte followed by the filtered row.
func filterRow(out *[5][]byte, cur, prev []byte, bpp int, filter pngFilter) []byte {
	switch filter {
	case filterNone:
		out[ftNone][0] = ftNone
		copy(out[ftNone][1:], cur)
		return out[ftNone]
	case filterSub:
		return filterSubRow(out[ftSub], cur, bpp)
	case filterPaeth:
		return filterPaethRow(out[ftPaeth], cur, prev, bpp)
	case filterAdaptive:
		best := filterUpRow(out[ftUp], cur, prev)
		bestSum := absSum(best)
		for _, cand := range [][]byte{filterSubRow(out[ftSub], cur, bpp), filterPaethRow(out[ftPaeth], cur, prev, bpp)} {
			if s := absSum(cand); s < bestSum {
				best, bestSum = cand, s
			}
		}
		return best
	default:
		return filterUpRow(out[ftUp], cur, prev)
	}
}

func filterUpRow(out, cur, prev []byte) []byte {
	out[0] = ftUp
	o := out[1 : len(cur)+1]
	prev = prev[:len(cur)]
	for i, c := range cur {
		o[i] = c - prev[i]
	}
	return out
}

func filterSubRow(out, cur []byte, bpp int) []byte {
	out[0] = ftSub
	o := out[1 : len(cur)+1]
	copy(o[:bpp], cur[:bpp])
	for i := bpp; i < len(cur); i++ {
		o[i] = cur[i] - cur[i-bpp]
	}
	return out
}

func filterPaethRow(out, cur, prev []byte, bpp int) []byte {
	out[0] = ftPaeth
	o := out[1 : len(cur)+1]
	for i := range bpp {
		o[i] = cur[i] - prev[i]
	}
	for i := bpp; i < len(cur); i++ {
		o[i] = cur[i] - paeth(cur[i-bpp], prev[i], prev[i-bpp])
	}
	return out
}

// paeth is the Paeth predictor (PNG specification, section 9.4).
func paeth(a, b, c uint8) uint8 {
	pc := int(c)
	pa := int(b) - pc
	pb := int(a) - pc
	pc = abs(pa + pb)
	pa = abs(pa)
	pb = abs(pb)
	if pa <= pb && pa <= pc {
		return a
	} else if pb <= pc {
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// absSum scores a filtered row: bytes read as signed, summed by magnitude.
func absSum(row []byte) int {
	s := 0
	for _, v := range row[1:] {
		s += abs(int(int8(v)))
	}
	return s
}
