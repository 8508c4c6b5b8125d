package vnc

import (
	"bufio"
	"bytes"
	"errors"
	"image"
	"image/color"
	"io"
	"reflect"
	"strings"
	"testing"
)

func newTestDecoder(stream []byte, w, h int) *decoder {
	return newDecoder(bufio.NewReader(bytes.NewReader(stream)), Limits{}.withDefaults(), w, h)
}

func readOne(t *testing.T, d *decoder) ServerMessage {
	t.Helper()
	m, err := d.readMessage()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rgba(img *image.RGBA, x, y int) color.RGBA { return img.RGBAAt(x, y) }

// Literal server messages, shared with the fuzz seeds.
var (
	// A 2x1 Raw rectangle at 1,1: red, then blue; X bytes left 0 as QEMU does.
	wireFBURaw2x1 = []byte{0, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0, 0xff, 0, 0, 0} // red, blue in BGRX
	// CopyRect of 2x2 from 0,0 to 1,1.
	wireFBUCopyRect = []byte{0, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}
	wireFBUResize   = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0, 4, 0xff, 0xff, 0xff, 0x21}
	// ExtendedDesktopSize 8x4, reason 0, status 0, one screen.
	wireFBUExtResize = cat([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0, 4, 0xff, 0xff, 0xfe, 0xcc, 1, 0, 0, 0}, make([]byte, 16))
	// A 3x2 cursor, hotspot 1,1; mask rows 101 and 010.
	wireFBUCursor = cat([]byte{0, 0, 0, 1, 0, 1, 0, 1, 0, 3, 0, 2, 0xff, 0xff, 0xff, 0x11},
		[]byte{3, 2, 1, 0, 6, 5, 4, 0, 9, 8, 7, 0, 12, 11, 10, 0, 15, 14, 13, 0, 18, 17, 16, 0}, // BGRX
		[]byte{0xa0, 0x40})
	wireFBUPseudoNotices = cat([]byte{0, 0, 0, 4},
		wireRect(0, 0, 64, 48, EncodingQEMUExtendedKeyEvent),
		wireRect(1, 0, 64, 48, EncodingPointerTypeChange),
		wireRect(0, 0, 1, 1, EncodingQEMULEDState, 0x04),
		wireRect(0, 0, 0, 0, EncodingDesktopName, 0, 0, 0, 3, 'n', 'e', 'w'))
	wireFBULastRect      = cat([]byte{0, 0, 0xff, 0xff}, wireRect(0, 0, 0, 0, EncodingLastRect))
	wireColourMap        = cat([]byte{1, 0, 0, 0, 0, 2}, make([]byte, 12))
	wireBell             = []byte{2}
	wireServerCutTextHi  = []byte{3, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'}
	wireFBURectOutside   = []byte{0, 0, 0, 1, 0, 60, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0}
	wireFBUHugeRect      = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	wireFBUCopyBadSource = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 1, 0, 62, 0, 0}
	wireFBUUnknownEnc    = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 16}
	wireFBUHugeResize    = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x21}
	wireFBUHugeCursor    = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0x10, 0, 0x10, 0, 0xff, 0xff, 0xff, 0x11}
	wireHugeCutText      = []byte{3, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}
	wireHugeName         = cat([]byte{0, 0, 0, 1}, wireRect(0, 0, 0, 0, EncodingDesktopName, 0xff, 0xff, 0xff, 0xff))
)

func TestDecodeRaw(t *testing.T) {
	d := newTestDecoder(wireFBURaw2x1, 4, 3)
	u := readOne(t, d).(*FramebufferUpdate)
	if !reflect.DeepEqual(u.Damage, []image.Rectangle{image.Rect(1, 1, 3, 2)}) || !u.Pixels || u.Resized {
		t.Fatalf("update %+v", u)
	}
	if c := rgba(d.fb, 1, 1); c != (color.RGBA{255, 0, 0, 255}) {
		t.Fatalf("pixel 1,1 = %v, want opaque red", c)
	}
	if c := rgba(d.fb, 2, 1); c != (color.RGBA{0, 0, 255, 255}) {
		t.Fatalf("pixel 2,1 = %v, want opaque blue", c)
	}
	if c := rgba(d.fb, 0, 1); c != (color.RGBA{}) {
		t.Fatalf("pixel 0,1 = %v, want untouched", c)
	}
}

func TestDecodeRawFullWidthRows(t *testing.T) {
	d := newTestDecoder(wireFBU(wireRawRect(0, 1, 4, 2, 9, 8, 7)), 4, 3)
	readOne(t, d)
	for y := 0; y < 3; y++ {
		for x := 0; x < 4; x++ {
			want := color.RGBA{}
			if y >= 1 {
				want = color.RGBA{9, 8, 7, 255}
			}
			if c := rgba(d.fb, x, y); c != want {
				t.Fatalf("pixel %d,%d = %v, want %v", x, y, c, want)
			}
		}
	}
}

func TestDecodeCopyRectOverlapping(t *testing.T) {
	// Paint a 3x3 gradient, then copy down-right and up-left over itself.
	var pix []byte
	for i := range 9 {
		pix = append(pix, 0, 0, byte(i), 0) // red = i, in BGRX
	}
	stream := cat(wireFBU(wireRect(0, 0, 3, 3, EncodingRaw, pix...)), wireFBUCopyRect,
		wireFBU(wireRect(0, 0, 2, 2, EncodingCopyRect, 0, 1, 0, 1)))
	d := newTestDecoder(stream, 3, 3)
	readOne(t, d)
	u := readOne(t, d).(*FramebufferUpdate)
	if !reflect.DeepEqual(u.Damage, []image.Rectangle{image.Rect(1, 1, 3, 3)}) {
		t.Fatalf("damage %v", u.Damage)
	}
	// After the first copy: row 1 = 0 0 1, row 2 = 6 3 4.
	want := [][]byte{{0, 1, 2}, {3, 0, 1}, {6, 3, 4}}
	for y, row := range want {
		for x, v := range row {
			if c := rgba(d.fb, x, y); c.R != v || c.A != 255 {
				t.Fatalf("after copy down: pixel %d,%d = %v, want R=%d", x, y, c, v)
			}
		}
	}
	readOne(t, d)
	want = [][]byte{{0, 1, 2}, {3, 4, 1}, {6, 3, 4}}
	for y, row := range want {
		for x, v := range row {
			if c := rgba(d.fb, x, y); c.R != v {
				t.Fatalf("after copy up: pixel %d,%d = %v, want R=%d", x, y, c, v)
			}
		}
	}
}

func TestDecodeDesktopSize(t *testing.T) {
	for name, stream := range map[string][]byte{"DesktopSize": wireFBUResize, "ExtendedDesktopSize": wireFBUExtResize} {
		d := newTestDecoder(cat(stream, wireFBU(wireRawRect(0, 0, 1, 1, 1, 2, 3))), 4, 3)
		old := d.fb
		u := readOne(t, d).(*FramebufferUpdate)
		if !u.Resized || d.fb.Rect != image.Rect(0, 0, 8, 4) || d.fb == old {
			t.Fatalf("%s: resized %v to %v", name, u.Resized, d.fb.Rect)
		}
		if u := readOne(t, d).(*FramebufferUpdate); u.Resized || len(u.Damage) != 1 {
			t.Fatalf("%s: update after resize %+v", name, u)
		}
	}
}

func TestDecodeDesktopSizeUnchangedOrRefused(t *testing.T) {
	// QEMU repeats the current size unasked; a refusal (status 3) never resizes.
	refused := cat([]byte{0, 0, 0, 1, 0, 1, 0, 3, 0, 9, 0, 9, 0xff, 0xff, 0xfe, 0xcc, 0, 0, 0, 0})
	d := newTestDecoder(cat(wireFBUResize, refused), 8, 4)
	old := d.fb
	for range 2 {
		if u := readOne(t, d).(*FramebufferUpdate); u.Resized || d.fb != old {
			t.Fatalf("resized: %+v to %v", u, d.fb.Rect)
		}
	}
}

func TestDecodeCursor(t *testing.T) {
	d := newTestDecoder(wireFBUCursor, 4, 3)
	u := readOne(t, d).(*FramebufferUpdate)
	if !u.CursorChanged || u.Pixels || len(u.Damage) != 0 {
		t.Fatalf("update %+v", u)
	}
	if d.cursor.Rect != image.Rect(0, 0, 3, 2) || d.hotspot != image.Pt(1, 1) || !d.hasCursor {
		t.Fatalf("cursor %v hotspot %v", d.cursor.Rect, d.hotspot)
	}
	want := map[image.Point]color.RGBA{
		{0, 0}: {1, 2, 3, 255}, {1, 0}: {}, {2, 0}: {7, 8, 9, 255},
		{0, 1}: {}, {1, 1}: {13, 14, 15, 255}, {2, 1}: {},
	}
	for p, c := range want {
		if got := d.cursor.RGBAAt(p.X, p.Y); got != c {
			t.Fatalf("cursor pixel %v = %v, want %v", p, got, c)
		}
	}
}

func TestDecodePseudoNotices(t *testing.T) {
	d := newTestDecoder(wireFBUPseudoNotices, 64, 48)
	u := readOne(t, d).(*FramebufferUpdate)
	if !u.ExtendedKeyEvents || u.Pixels || u.Rectangles != 4 {
		t.Fatalf("update %+v", u)
	}
	if d.ledState != 4 || d.name != "new" {
		t.Fatalf("led state %d, name %q", d.ledState, d.name)
	}
}

func TestDecodeLastRect(t *testing.T) {
	d := newTestDecoder(cat(wireFBULastRect, wireBell), 4, 4)
	if u := readOne(t, d).(*FramebufferUpdate); u.Rectangles != 1 {
		t.Fatalf("update %+v", u)
	}
	if _, ok := readOne(t, d).(*Bell); !ok {
		t.Fatal("LastRect did not end the update")
	}
}

func TestDecodeOtherServerMessages(t *testing.T) {
	d := newTestDecoder(cat(wireColourMap, wireBell, wireServerCutTextHi), 4, 4)
	if m := readOne(t, d).(*SetColourMapEntries); m.Colours != 2 {
		t.Fatalf("colour map %+v", m)
	}
	readOne(t, d)
	if m := readOne(t, d).(*ServerCutText); string(m.Text) != "hi" {
		t.Fatalf("cut text %q", m.Text)
	}
	if _, err := d.readMessage(); !errors.Is(err, io.EOF) {
		t.Fatalf("at end of stream: %v", err)
	}
}

func TestDecodeHostileStreams(t *testing.T) {
	tests := []struct {
		name     string
		stream   []byte
		wantErr  error
		wantText string
	}{
		{"rectangle outside", wireFBURectOutside, ErrProtocol, "outside the 64x48 framebuffer"},
		{"huge rectangle", wireFBUHugeRect, ErrProtocol, "outside"},
		{"copyrect source outside", wireFBUCopyBadSource, ErrProtocol, "copyrect source"},
		{"unknown encoding", wireFBUUnknownEnc, ErrProtocol, "ZRLE"},
		{"unknown message type", []byte{77}, ErrProtocol, "server message type 77"},
		{"huge resize", wireFBUHugeResize, ErrProtocol, "over the limit"},
		{"huge cursor", wireFBUHugeCursor, ErrProtocol, "cursor 4096x4096"},
		{"huge cut text", wireHugeCutText, ErrProtocol, "server cut text"},
		{"huge desktop name", wireHugeName, ErrProtocol, "over the limit"},
		{"raw rectangle cut short", wireFBURaw2x1[:20], io.ErrUnexpectedEOF, "read raw pixels"},
		{"header cut short", wireFBURaw2x1[:8], io.ErrUnexpectedEOF, "rectangle header 1 of 1"},
		{"cursor cut short", wireFBUCursor[:30], io.ErrUnexpectedEOF, "read cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDecoder(tt.stream, 64, 48)
			_, err := d.readMessage()
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("error %v, want %v containing %q", err, tt.wantErr, tt.wantText)
			}
		})
	}
}

func TestToRGBA(t *testing.T) {
	for n := range 9 {
		p := make([]byte, 4*n)
		for i := range p {
			p[i] = byte(i)
		}
		toRGBA(p)
		for i := range p {
			// B, G, R, X becomes R, G, B, 255.
			want := byte(i)
			switch i % 4 {
			case 0:
				want = byte(i + 2)
			case 2:
				want = byte(i - 2)
			case 3:
				want = 0xff
			}
			if p[i] != want {
				t.Fatalf("%d pixels: byte %d = %d, want %d", n, i, p[i], want)
			}
		}
	}
}
