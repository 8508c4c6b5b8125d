package screenshot

// Scale relates a picture of ScaledW by ScaledH pixels to the native
// framebuffer area of NativeW by NativeH pixels it shows, and maps pixel
// coordinates between the two. Each axis maps on its own.
//
// When the picture is smaller than the native area (or equal), both
// directions map with the corners aligned: 0 maps to 0 and the last pixel to
// the last pixel, a scaled pixel maps to a native pixel inside its
// footprint, and native→scaled→native moves a point by at most half a
// scaled pixel plus the half native pixel lost to rounding. When the picture
// is larger (a zoom), a scaled pixel maps to the native pixel under its
// centre, and native→scaled→native is exact.
//
// Coordinates outside the source size are clamped to its edge pixels. A
// Scale with a non-positive size maps nothing: it returns its input.
type Scale struct{ NativeW, NativeH, ScaledW, ScaledH int }

// Identity is the Scale of a picture at native size.
func Identity(w, h int) Scale { return Scale{NativeW: w, NativeH: h, ScaledW: w, ScaledH: h} }

// Size returns the size of the scaled picture.
func (s Scale) Size() (w, h int) { return s.ScaledW, s.ScaledH }

// IsIdentity reports whether the picture is at native size.
func (s Scale) IsIdentity() bool { return s.NativeW == s.ScaledW && s.NativeH == s.ScaledH }

func (s Scale) valid() bool { return s.NativeW > 0 && s.NativeH > 0 && s.ScaledW > 0 && s.ScaledH > 0 }

// ToNative maps a pixel of the scaled picture to the native pixel a click on
// it means.
func (s Scale) ToNative(x, y int) (int, int) {
	if !s.valid() {
		return x, y
	}
	return toNativeAxis(x, s.ScaledW, s.NativeW), toNativeAxis(y, s.ScaledH, s.NativeH)
}

// FromNative maps a native pixel to the pixel of the scaled picture that
// shows it, for example to report the pointer position to a model.
func (s Scale) FromNative(x, y int) (int, int) {
	if !s.valid() {
		return x, y
	}
	return alignCorners(clamp(x, 0, s.NativeW-1), s.NativeW, s.ScaledW), alignCorners(clamp(y, 0, s.NativeH-1), s.NativeH, s.ScaledH)
}

// toNativeAxis maps v on an axis of scaled pixels to one of native pixels.
func toNativeAxis(v, scaled, native int) int {
	v = clamp(v, 0, scaled-1)
	if native <= scaled {
		// Zoomed in: the native pixel under the scaled pixel's centre,
		// floor((v+0.5)·native/scaled). Aligning corners here would pick a
		// neighbour of the pixel the picture shows.
		return int((int64(2*v+1) * int64(native)) / (2 * int64(scaled)))
	}
	return alignCorners(v, scaled, native)
}

// alignCorners maps v in [0, from) to round(v·(to-1)/(from-1)) in [0, to),
// so that both ends map to both ends; a one-pixel source maps to the middle.
func alignCorners(v, from, to int) int {
	if from == 1 {
		return (to - 1) / 2
	}
	num := 2*int64(v)*int64(to-1) + int64(from-1)
	return int(num / (2 * int64(from-1)))
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }
