package screenshot

import (
	"image"
	"testing"
)

func TestScaleEdgesMapToEdges(t *testing.T) {
	for _, s := range []Scale{
		{1280, 800, 1024, 640},
		{2560, 1600, 1280, 800},
		{5120, 2880, 1280, 720},
		{1920, 1080, 1429, 804},
		{1281, 799, 1023, 641},
		{1280, 800, 1280, 800},
		{200, 100, 1000, 500}, // zoom
		{7, 3, 2, 2},
	} {
		w, h := s.Size()
		if x, y := s.ToNative(0, 0); x != 0 || y != 0 {
			t.Errorf("%v: ToNative(0,0) = %d,%d", s, x, y)
		}
		if x, y := s.ToNative(w-1, h-1); x != s.NativeW-1 || y != s.NativeH-1 {
			t.Errorf("%v: ToNative(%d,%d) = %d,%d, want %d,%d", s, w-1, h-1, x, y, s.NativeW-1, s.NativeH-1)
		}
		if x, y := s.FromNative(0, 0); x != 0 || y != 0 {
			t.Errorf("%v: FromNative(0,0) = %d,%d", s, x, y)
		}
		if x, y := s.FromNative(s.NativeW-1, s.NativeH-1); x != w-1 || y != h-1 {
			t.Errorf("%v: FromNative(last) = %d,%d, want %d,%d", s, x, y, w-1, h-1)
		}
	}
}

func TestScaleKnownPoints(t *testing.T) {
	tests := []struct {
		s          Scale
		sx, sy     int
		nx, ny     int
		backX, bkY int
	}{
		// Half size: scaled 10 is native 20 (or 21): corners aligned gives
		// round(10·2559/1279) = round(20.008) = 20.
		{Scale{2560, 1600, 1280, 800}, 10, 10, 20, 20, 10, 10},
		{Scale{2560, 1600, 1280, 800}, 640, 400, 1281, 801, 640, 400},
		// XGA from 1280x800 is not the same aspect: axes map on their own.
		{Scale{1280, 800, 1024, 768}, 512, 384, 640, 400, 512, 384},
		// A zoom of 4: scaled 0-3 are native 0, 4-7 native 1.
		{Scale{100, 100, 400, 400}, 3, 4, 0, 1, 0, 4},
		{Scale{100, 100, 400, 400}, 399, 7, 99, 1, 399, 4},
		// Identity.
		{Identity(1280, 800), 17, 799, 17, 799, 17, 799},
	}
	for _, tt := range tests {
		nx, ny := tt.s.ToNative(tt.sx, tt.sy)
		if nx != tt.nx || ny != tt.ny {
			t.Errorf("%v.ToNative(%d,%d) = %d,%d, want %d,%d", tt.s, tt.sx, tt.sy, nx, ny, tt.nx, tt.ny)
		}
		bx, by := tt.s.FromNative(nx, ny)
		if bx != tt.backX || by != tt.bkY {
			t.Errorf("%v.FromNative(%d,%d) = %d,%d, want %d,%d", tt.s, nx, ny, bx, by, tt.backX, tt.bkY)
		}
	}
}

func TestScaleClampsOutside(t *testing.T) {
	s := Scale{1280, 800, 1024, 640}
	if x, y := s.ToNative(-5, 10000); x != 0 || y != 799 {
		t.Errorf("ToNative(-5,10000) = %d,%d, want 0,799", x, y)
	}
	if x, y := s.FromNative(99999, -1); x != 1023 || y != 0 {
		t.Errorf("FromNative(99999,-1) = %d,%d, want 1023,0", x, y)
	}
	var zero Scale
	if x, y := zero.ToNative(3, 4); x != 3 || y != 4 {
		t.Errorf("zero Scale mapped 3,4 to %d,%d", x, y)
	}
}

func TestIdentityIsExact(t *testing.T) {
	for _, size := range []image.Point{{1, 1}, {3, 5}, {1280, 800}, {1279, 801}} {
		s := Identity(size.X, size.Y)
		if !s.IsIdentity() {
			t.Errorf("Identity(%v) is not identity", size)
		}
		for x := range size.X {
			if nx, _ := s.ToNative(x, 0); nx != x {
				t.Fatalf("Identity(%v).ToNative(%d) = %d", size, x, nx)
			}
			if sx, _ := s.FromNative(x, 0); sx != x {
				t.Fatalf("Identity(%v).FromNative(%d) = %d", size, x, sx)
			}
		}
	}
}

// checkAxis checks every invariant of one axis of s exhaustively.
func checkAxis(t testing.TB, native, scaled int) {
	t.Helper()
	to := func(v int) int { return toNativeAxis(v, scaled, native) }
	from := func(v int) int { return alignCorners(v, native, scaled) }
	prev := -1
	for x := range scaled {
		n := to(x)
		if n < 0 || n >= native {
			t.Fatalf("native %d scaled %d: ToNative(%d) = %d out of range", native, scaled, x, n)
		}
		if n < prev {
			t.Fatalf("native %d scaled %d: ToNative not monotonic at %d: %d after %d", native, scaled, x, n, prev)
		}
		prev = n
		// The native pixel [n, n+1) overlaps the footprint of scaled pixel
		// x, [x·native/scaled, (x+1)·native/scaled): the click lands on
		// something the picture showed there.
		if int64(n+1)*int64(scaled) <= int64(x)*int64(native) || int64(n)*int64(scaled) >= int64(x+1)*int64(native) {
			t.Fatalf("native %d scaled %d: ToNative(%d) = %d outside the pixel's footprint", native, scaled, x, n)
		}
		if native >= scaled && from(n) != x {
			t.Fatalf("native %d scaled %d: downscaled scaled→native→scaled moved %d to %d", native, scaled, x, from(n))
		}
	}
	prev = -1
	for n := range native {
		s := from(n)
		if s < 0 || s >= scaled || s < prev {
			t.Fatalf("native %d scaled %d: FromNative(%d) = %d out of range or order", native, scaled, n, s)
		}
		prev = s
		back := to(s)
		d := int64(abs(back - n))
		switch {
		case native <= scaled && back != n:
			t.Fatalf("native %d scaled %d: zoomed native→scaled→native moved %d to %d", native, scaled, n, back)
		case native > scaled && scaled > 1 && 2*d*int64(scaled-1) > int64(native-1)+int64(scaled-1):
			// |back-n| ≤ ½·(native-1)/(scaled-1) + ½: half a scaled pixel,
			// plus the rounding to a native pixel.
			t.Fatalf("native %d scaled %d: native→scaled→native moved %d to %d, more than half a scaled pixel", native, scaled, n, back)
		}
	}
	if scaled > 1 && (to(0) != 0 || to(scaled-1) != native-1) {
		t.Fatalf("native %d scaled %d: edges map to %d and %d", native, scaled, to(0), to(scaled-1))
	}
	if native > 1 && (from(0) != 0 || from(native-1) != scaled-1) {
		t.Fatalf("native %d scaled %d: native edges map to %d and %d", native, scaled, from(0), from(native-1))
	}
}

func TestScaleInvariantsSmallSizes(t *testing.T) {
	for native := 1; native <= 70; native++ {
		for scaled := 1; scaled <= 70; scaled++ {
			checkAxis(t, native, scaled)
		}
	}
}

func TestScaleInvariantsScreenSizes(t *testing.T) {
	for _, pair := range [][2]int{{1280, 1024}, {800, 640}, {1920, 1429}, {1080, 804}, {2560, 1280}, {5120, 1280}, {1366, 1366}, {1280, 4096}, {3840, 1}} {
		checkAxis(t, pair[0], pair[1])
	}
}

func FuzzScaleAxis(f *testing.F) {
	f.Add(uint16(1280), uint16(1024))
	f.Add(uint16(3), uint16(1000))
	f.Add(uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, native, scaled uint16) {
		checkAxis(t, int(native%5000)+1, int(scaled%5000)+1)
	})
}

func TestFitWithin(t *testing.T) {
	tests := []struct {
		name         string
		w, h         int
		l            Limits
		wantW, wantH int
	}{
		{"WXGA is within Anthropic's limits", 1280, 800, AnthropicLimits(), 1280, 800},
		{"full HD by pixel count", 1920, 1080, AnthropicLimits(), 1430, 804},
		{"4K", 3840, 2160, AnthropicLimits(), 1430, 804},
		{"tall phone by long edge", 1080, 2400, AnthropicLimits(), 706, 1568},
		{"long strip by long edge", 4000, 400, AnthropicLimits(), 1568, 157},
		{"no limits", 5000, 5000, Limits{}, 5000, 5000},
		{"never enlarges", 640, 480, Limits{MaxLongEdge: 2000}, 640, 480},
		{"box", 1280, 800, Limits{MaxWidth: 1024, MaxHeight: 768}, 1024, 640},
		{"box by height", 1280, 1024, Limits{MaxWidth: 1024, MaxHeight: 768}, 960, 768},
		{"square long edge", 3000, 3000, Limits{MaxLongEdge: 1000}, 1000, 1000},
		{"tiny limit", 1000, 10, Limits{MaxPixels: 1}, 1, 1},
		{"odd sizes", 1281, 799, Limits{MaxLongEdge: 1000}, 1000, 624},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := FitWithin(tt.w, tt.h, tt.l)
			if w, h := s.Size(); w != tt.wantW || h != tt.wantH {
				t.Errorf("FitWithin(%d, %d, %+v) = %dx%d, want %dx%d", tt.w, tt.h, tt.l, w, h, tt.wantW, tt.wantH)
			}
			if s.NativeW != tt.w || s.NativeH != tt.h {
				t.Errorf("native size %dx%d, want %dx%d", s.NativeW, s.NativeH, tt.w, tt.h)
			}
		})
	}
}

func FuzzFitWithin(f *testing.F) {
	f.Add(uint16(1920), uint16(1080), uint16(1568), uint32(1_150_000), uint16(0), uint16(0))
	f.Add(uint16(1), uint16(9000), uint16(3), uint32(0), uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, w, h, long uint16, pixels uint32, maxW, maxH uint16) {
		nw, nh := int(w)+1, int(h)+1
		l := Limits{MaxLongEdge: int(long), MaxPixels: int(pixels % 50_000_000), MaxWidth: int(maxW), MaxHeight: int(maxH)}
		s := FitWithin(nw, nh, l)
		sw, sh := s.Size()
		if sw < 1 || sh < 1 || sw > nw || sh > nh {
			t.Fatalf("FitWithin(%d,%d,%+v) = %dx%d: outside 1x1 to native", nw, nh, l, sw, sh)
		}
		if !l.admits(sw, sh) {
			t.Fatalf("FitWithin(%d,%d,%+v) = %dx%d breaks the limits", nw, nh, l, sw, sh)
		}
		if l.admits(nw, nh) && !s.IsIdentity() {
			t.Fatalf("FitWithin(%d,%d,%+v) = %dx%d scaled an image within limits", nw, nh, l, sw, sh)
		}
		// The aspect ratio holds to within a pixel of the derived side.
		if nw >= nh {
			if want := max(1, roundDiv(nh*sw, nw)); sh != want {
				t.Fatalf("FitWithin(%d,%d) = %dx%d, height should be %d for the aspect", nw, nh, sw, sh, want)
			}
		} else if want := max(1, roundDiv(nw*sh, nh)); sw != want {
			t.Fatalf("FitWithin(%d,%d) = %dx%d, width should be %d for the aspect", nw, nh, sw, sh, want)
		}
		// It is the largest such size: one more pixel on the long side breaks
		// a limit (or the native size).
		if !s.IsIdentity() {
			lw, lh := sw+1, max(1, roundDiv(nh*(sw+1), nw))
			if nh > nw {
				lh, lw = sh+1, max(1, roundDiv(nw*(sh+1), nh))
			}
			if l.admits(lw, lh) && lw <= nw && lh <= nh {
				t.Fatalf("FitWithin(%d,%d,%+v) = %dx%d, but %dx%d also fits", nw, nh, l, sw, sh, lw, lh)
			}
		}
	})
}

func TestScaleTo(t *testing.T) {
	tests := []struct {
		w, h, reqW, reqH int
		wantW, wantH     int
	}{
		{1280, 800, 1024, 768, 1024, 768},
		{1280, 800, 1024, 0, 1024, 640},
		{1280, 800, 0, 400, 640, 400},
		{1280, 800, 0, 0, 1280, 800},
		{100, 50, 400, 0, 400, 200},
		{3, 1000, 0, 10, 1, 10},
	}
	for _, tt := range tests {
		if w, h := ScaleTo(tt.w, tt.h, tt.reqW, tt.reqH).Size(); w != tt.wantW || h != tt.wantH {
			t.Errorf("ScaleTo(%d,%d,%d,%d) = %dx%d, want %dx%d", tt.w, tt.h, tt.reqW, tt.reqH, w, h, tt.wantW, tt.wantH)
		}
	}
}

func TestFitTargetLikeTheReferenceImplementation(t *testing.T) {
	tests := []struct {
		w, h         int
		wantW, wantH int
	}{
		{1280, 800, 1280, 800},  // WXGA itself: not narrower, unscaled
		{1920, 1200, 1280, 800}, // 16:10
		{1600, 1200, 1024, 768}, // 4:3
		{1920, 1080, 1366, 768}, // 16:9 within 0.02 of 1366/768
		{1024, 768, 1024, 768},
		{1000, 1000, 1000, 1000}, // no matching aspect
		{800, 600, 800, 600},     // 4:3 but smaller than XGA
	}
	for _, tt := range tests {
		if w, h := FitTarget(tt.w, tt.h, ReferenceTargets()).Size(); w != tt.wantW || h != tt.wantH {
			t.Errorf("FitTarget(%d,%d) = %dx%d, want %dx%d", tt.w, tt.h, w, h, tt.wantW, tt.wantH)
		}
	}
}

// coordinateMapper is the shape input/ consumes; Scale and Shot must keep it.
type coordinateMapper interface {
	Size() (w, h int)
	ToNative(x, y int) (int, int)
	FromNative(x, y int) (int, int)
}

var (
	_ coordinateMapper = Scale{}
	_ coordinateMapper = Shot{}
)
