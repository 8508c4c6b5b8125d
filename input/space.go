package input

// Space is a coordinate space that actions may be expressed in, such as a
// scaled screenshot's (screenshot.Scale implements it). Coordinates outside
// [0, w) x [0, h) are rejected, never clamped.
type Space interface {
	// Size is the width and height of the space in its own pixels.
	Size() (w, h int)
	// ToNative maps a point of the space to native framebuffer pixels.
	ToNative(x, y int) (int, int)
	// FromNative maps native framebuffer pixels to the space.
	FromNative(x, y int) (int, int)
}

// NativeSpace is the identity space of a native framebuffer of the given size.
type NativeSpace struct{ Width, Height int }

var _ Space = NativeSpace{}

// Size returns the framebuffer size.
func (s NativeSpace) Size() (w, h int) { return s.Width, s.Height }

// ToNative returns the point unchanged.
func (s NativeSpace) ToNative(x, y int) (int, int) { return x, y }

// FromNative returns the point unchanged.
func (s NativeSpace) FromNative(x, y int) (int, int) { return x, y }
