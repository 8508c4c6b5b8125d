package screenshot

import (
	"image"
	"math"
)

// Limits bound the size of a picture for a model. A zero field is no limit.
type Limits struct {
	// MaxLongEdge bounds the longer of width and height.
	MaxLongEdge int
	// MaxPixels bounds width times height.
	MaxPixels int
	// MaxWidth and MaxHeight bound each side.
	MaxWidth, MaxHeight int
}

// Anthropic's published guidance for image input: a longer edge of at most
// 1568 pixels and about 1.15 megapixels; bigger images are downscaled by the
// API anyway, costing latency and blurring what the model sees.
const (
	AnthropicMaxLongEdge = 1568
	AnthropicMaxPixels   = 1_150_000
)

// AnthropicLimits returns Limits with Anthropic's image guidance.
func AnthropicLimits() Limits {
	return Limits{MaxLongEdge: AnthropicMaxLongEdge, MaxPixels: AnthropicMaxPixels}
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// FitWithin returns the Scale to the largest size with native's aspect ratio
// that satisfies l: the long side as large as it can be, the short side
// following from it, rounded to the nearest pixel. It never enlarges: an
// image already within l keeps its size. Sizes are at least 1 by 1.
func FitWithin(nativeW, nativeH int, l Limits) Scale {
	if nativeW <= 0 || nativeH <= 0 || l.admits(nativeW, nativeH) {
		return Identity(nativeW, nativeH)
	}
	long, short := nativeW, nativeH
	if nativeH > nativeW {
		long, short = nativeH, nativeW
	}
	size := func(longSide int) (w, h int) {
		shortSide := max(1, roundDiv(short*longSide, long))
		if nativeH > nativeW {
			return shortSide, longSide
		}
		return longSide, shortSide
	}
	// Every limit is an upper bound and the short side grows with the long
	// one, so the sizes that fit are a prefix of 1..long: find its end.
	lo, hi := 1, long // size(lo) is the answer unless something larger fits
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if l.admits(size(mid)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	w, h := size(lo)
	return Scale{NativeW: nativeW, NativeH: nativeH, ScaledW: w, ScaledH: h}
}

func (l Limits) admits(w, h int) bool {
	return (l.MaxLongEdge <= 0 || max(w, h) <= l.MaxLongEdge) &&
		(l.MaxPixels <= 0 || w*h <= l.MaxPixels) &&
		(l.MaxWidth <= 0 || w <= l.MaxWidth) &&
		(l.MaxHeight <= 0 || h <= l.MaxHeight)
}

// ScaleTo returns the Scale to width by height. A zero (or negative) side
// follows from the other and the aspect ratio; both zero is native size.
// Unlike FitWithin it may enlarge, for zooming into a region.
func ScaleTo(nativeW, nativeH, width, height int) Scale {
	switch {
	case nativeW <= 0 || nativeH <= 0 || (width <= 0 && height <= 0):
		return Identity(nativeW, nativeH)
	case width <= 0:
		width = max(1, roundDiv(nativeW*height, nativeH))
	case height <= 0:
		height = max(1, roundDiv(nativeH*width, nativeW))
	}
	return Scale{NativeW: nativeW, NativeH: nativeH, ScaledW: width, ScaledH: height}
}

// ReferenceTargets returns the screen sizes of Anthropic's computer-use
// reference implementation, in its order: XGA 1024x768 (4:3), WXGA 1280x800
// (16:10) and FWXGA 1366x768 (about 16:9). It scales a larger screen down to
// the one with the same aspect ratio.
func ReferenceTargets() []image.Point {
	return []image.Point{{1024, 768}, {1280, 800}, {1366, 768}}
}

// aspectTolerance is how far apart two width/height ratios may be and still
// count as the same aspect: the reference implementation's 0.02, since
// "16:9" screens are rarely exactly 16:9.
const aspectTolerance = 0.02

// FitTarget returns the Scale to the first target whose aspect ratio matches
// native's, if that target is narrower than native; otherwise native size.
// With ReferenceTargets it reproduces Anthropic's reference implementation.
func FitTarget(nativeW, nativeH int, targets []image.Point) Scale {
	if nativeW <= 0 || nativeH <= 0 {
		return Identity(nativeW, nativeH)
	}
	ratio := float64(nativeW) / float64(nativeH)
	for _, t := range targets {
		if t.X <= 0 || t.Y <= 0 {
			continue
		}
		if math.Abs(float64(t.X)/float64(t.Y)-ratio) < aspectTolerance {
			if t.X < nativeW {
				return Scale{NativeW: nativeW, NativeH: nativeH, ScaledW: t.X, ScaledH: t.Y}
			}
			break
		}
	}
	return Identity(nativeW, nativeH)
}

// roundDiv returns a/b rounded half up, for non-negative a and positive b.
func roundDiv(a, b int) int { return (2*a + b) / (2 * b) }
