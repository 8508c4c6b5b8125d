package vnc

import (
	"bytes"
	"errors"
	"image"
	"testing"
)

// Literal client messages, shared with the fuzz seeds.
var (
	wireSetPixelFormatBGRX  = []byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}
	wireSetEncodingsRawCopy = []byte{2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1}
	wireFBURIncremental     = []byte{3, 1, 0, 0, 0, 0, 0x02, 0xd0, 0x01, 0x90}
	wireFBURFull            = []byte{3, 0, 0, 0, 0, 0, 0x02, 0xd0, 0x01, 0x90}
	wireKeyDownA            = []byte{4, 1, 0, 0, 0, 0, 0, 'a'}
	wirePointerLeft         = []byte{5, 1, 0x01, 0x2c, 0x00, 0xc8} // left button at 300,200
	wireCutTextHi           = []byte{6, 0, 0, 0, 0, 0, 0, 3, 'h', 0xe9, '?'}
	wireQEMUKeyUpZero       = []byte{255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	wireQEMUKeyDownA        = []byte{255, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0x1e}
	wireEnableCU            = []byte{150, 1, 0, 0, 0, 0, 0x02, 0xd0, 0x01, 0x90}
	wireFence               = []byte{248, 0, 0, 0, 0x80, 0, 0, 3, 2, 0xaa, 0xbb}
	wireXVPReset            = []byte{250, 0, 1, 2}
	wireSetDesktopSize1     = cat([]byte{251, 0, 0x05, 0x00, 0x03, 0x20, 1, 0}, make([]byte, 16))
	wireQEMUAudioEnable     = []byte{255, 1, 0, 0}
	wireQEMUAudioFormat     = []byte{255, 1, 0, 2, 3, 2, 0, 0, 0xac, 0x44}
	wireCutTextExtended     = []byte{6, 0, 0, 0, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 1} // length -4
	// SetEncodings with ExtendedMouseButtons between Raw and Cursor.
	wireSetEncodingsWithEMB = []byte{2, 0, 0, 3, 0, 0, 0, 0, 0xff, 0xff, 0xfe, 0xc4, 0xff, 0xff, 0xff, 0x11}
)

func TestClientMessageEncoders(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"SetPixelFormat BGRX", appendSetPixelFormat(nil, pixelFormatBGRX), wireSetPixelFormatBGRX},
		{"SetEncodings", appendSetEncodings(nil, []Encoding{EncodingRaw, EncodingCopyRect}), wireSetEncodingsRawCopy},
		{"FramebufferUpdateRequest incremental", appendFramebufferUpdateRequest(nil, true, image.Rect(0, 0, 720, 400)), wireFBURIncremental},
		{"FramebufferUpdateRequest full", appendFramebufferUpdateRequest(nil, false, image.Rect(0, 0, 720, 400)), wireFBURFull},
		{"KeyEvent", appendKeyEvent(nil, true, 'a'), wireKeyDownA},
		{"PointerEvent", appendPointerEvent(nil, 1, 300, 200), wirePointerLeft},
		{"ClientCutText latin1", appendClientCutText(nil, latin1("hé€")), wireCutTextHi},
		{"QEMU extended key release 0", appendQEMUExtendedKeyEvent(nil, false, 0, 0), wireQEMUKeyUpZero},
		{"QEMU extended key a", appendQEMUExtendedKeyEvent(nil, true, 'a', 0x1e), wireQEMUKeyDownA},
		{"SetEncodings negative", appendSetEncodings(nil, []Encoding{EncodingCursor}), []byte{2, 0, 0, 1, 0xff, 0xff, 0xff, 0x11}},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s: %x, want %x", tt.name, tt.got, tt.want)
		}
	}
}

func TestClientMessageSize(t *testing.T) {
	whole := [][]byte{
		wireSetPixelFormatBGRX, wireSetEncodingsRawCopy, wireFBURIncremental, wireKeyDownA,
		wirePointerLeft, wireCutTextHi, wireQEMUKeyUpZero, wireEnableCU, wireFence,
		wireXVPReset, wireSetDesktopSize1, wireQEMUAudioEnable, wireQEMUAudioFormat,
		wireCutTextExtended, wireSetEncodingsWithEMB, {2, 0, 0, 0}, {6, 0, 0, 0, 0, 0, 0, 0},
	}
	for _, msg := range whole {
		// Every prefix asks for more, and the whole message is the answer.
		for i := 0; i < len(msg); i++ {
			need, err := clientMessageSize(msg[:i], 1<<20)
			if err != nil || need <= i || need > len(msg) {
				t.Fatalf("%x prefix %d: need %d, err %v", msg, i, need, err)
			}
		}
		if need, err := clientMessageSize(append(msg, 0xee), 1<<20); err != nil || need != len(msg) {
			t.Fatalf("%x: need %d, err %v", msg, need, err)
		}
	}
}

func TestClientMessageSizeErrors(t *testing.T) {
	for _, msg := range [][]byte{
		{1},                            // FixColourMapEntries, long obsolete
		{7},                            // unassigned
		{127},                          // VMware
		{255, 2},                       // QEMU submessage
		{255, 1, 0, 9},                 // QEMU audio operation
		{6, 0, 0, 0, 0, 0x10, 0, 1},    // cut text over the limit
		{6, 0, 0, 0, 0x80, 0, 0, 0},    // -2^31 bytes
		{248, 0, 0, 0, 0, 0, 0, 0, 65}, // fence payload over 64
	} {
		if _, err := clientMessageSize(msg, 1<<20); !errors.Is(err, ErrProtocol) {
			t.Errorf("%x: error %v, want ErrProtocol", msg, err)
		}
	}
}

func feedAll(t *testing.T, f *clientFilter, stream []byte, chunk int) []byte {
	t.Helper()
	var out []byte
	for len(stream) > 0 {
		n := min(chunk, len(stream))
		got, err := f.feed(stream[:n])
		if err != nil {
			t.Fatalf("feed: %v", err)
		}
		out = append(out, got...)
		stream = stream[n:]
	}
	return out
}

func TestClientFilterViewOnly(t *testing.T) {
	stream := cat(wireSetPixelFormatBGRX, wireKeyDownA, wireSetEncodingsRawCopy, wirePointerLeft,
		wireFBURIncremental, wireCutTextHi, wireQEMUKeyDownA, wireQEMUAudioEnable, wireFence,
		wireXVPReset, wireSetDesktopSize1, wireEnableCU, wireCutTextExtended)
	want := cat(wireSetPixelFormatBGRX, wireSetEncodingsRawCopy, wireFBURIncremental,
		wireQEMUAudioEnable, wireFence, wireEnableCU)
	for _, chunk := range []int{1, 3, 7, 64, len(stream)} {
		f := &clientFilter{viewOnly: true, maxCutText: 1 << 20}
		if got := feedAll(t, f, stream, chunk); !bytes.Equal(got, want) {
			t.Fatalf("chunks of %d: forwarded\n%x\nwant\n%x", chunk, got, want)
		}
		if f.dropped != 7 {
			t.Fatalf("chunks of %d: dropped %d, want 7", chunk, f.dropped)
		}
		if len(f.pending) != 0 {
			t.Fatalf("chunks of %d: %d bytes left pending", chunk, len(f.pending))
		}
	}
}

func TestClientFilterControl(t *testing.T) {
	stream := cat(wireKeyDownA, wirePointerLeft, wireCutTextHi, wireQEMUKeyDownA, wireXVPReset, wireSetDesktopSize1)
	f := &clientFilter{maxCutText: 1 << 20}
	want := cat(wireKeyDownA, wirePointerLeft, wireCutTextHi, wireQEMUKeyDownA, wireXVPReset)
	if got := feedAll(t, f, stream, 5); !bytes.Equal(got, want) {
		t.Fatalf("forwarded %x, want %x (SetDesktopSize dropped)", got, want)
	}
	f = &clientFilter{maxCutText: 1 << 20, allowResize: true}
	if got := feedAll(t, f, stream, 5); !bytes.Equal(got, stream) {
		t.Fatalf("with resize allowed forwarded %x, want everything", got)
	}
}

func TestClientFilterStripsExtendedMouseButtons(t *testing.T) {
	f := &clientFilter{maxCutText: 1 << 20}
	got := feedAll(t, f, wireSetEncodingsWithEMB, 2)
	want := []byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x11}
	if !bytes.Equal(got, want) {
		t.Fatalf("forwarded %x, want %x", got, want)
	}
}

func TestClientFilterUnframeable(t *testing.T) {
	f := &clientFilter{maxCutText: 16}
	if _, err := f.feed(cat(wireKeyDownA, []byte{9})); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unknown type: error %v", err)
	}
	f = &clientFilter{maxCutText: 16}
	if _, err := f.feed([]byte{6, 0, 0, 0, 0, 0, 0, 17}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("cut text over limit: error %v", err)
	}
}
