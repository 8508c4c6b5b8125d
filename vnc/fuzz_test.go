package vnc

import (
	"bufio"
	"bytes"
	"image"
	"testing"
)

// Fuzz targets for every parser, seeded with the literal wire bytes of the
// unit tests. Limits are small so that the fuzzer explores instead of
// allocating.

var fuzzLimits = Limits{MaxWidth: 256, MaxHeight: 256, MaxNameLength: 256, MaxCutText: 4096, MaxCursorSize: 64, MaxReasonLength: 256}

var serverMessageSeeds = [][]byte{
	wireFBURaw2x1, wireFBUCopyRect, wireFBUResize, wireFBUExtResize, wireFBUCursor,
	wireFBUPseudoNotices, wireFBULastRect, wireColourMap, wireBell, wireServerCutTextHi,
	wireFBURectOutside, wireFBUHugeRect, wireFBUCopyBadSource, wireFBUUnknownEnc,
	wireFBUHugeResize, wireFBUHugeCursor, wireHugeCutText, wireHugeName, wireExtKeyAck,
	cat(wireFBUResize, wireFBU(wireRawRect(0, 0, 8, 4, 1, 2, 3)), wireFBUCopyRect),
}

func FuzzServerMessages(f *testing.F) {
	for _, s := range serverMessageSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := fuzzLimits.withDefaults()
		d := newDecoder(bufio.NewReader(bytes.NewReader(data)), lim, 64, 48)
		for range 64 {
			msg, err := d.readMessage()
			if err != nil {
				return
			}
			if d.fb.Rect.Dx() > lim.MaxWidth || d.fb.Rect.Dy() > lim.MaxHeight {
				t.Fatalf("framebuffer %v over the limits", d.fb.Rect)
			}
			if u, ok := msg.(*FramebufferUpdate); ok {
				for _, r := range u.Damage {
					if !r.In(d.fb.Rect) {
						t.Fatalf("damage %v outside %v", r, d.fb.Rect)
					}
				}
			}
			if d.cursor != nil && (d.cursor.Rect.Dx() > lim.MaxCursorSize || !d.hotspot.In(d.cursor.Rect) && !d.cursor.Rect.Empty()) {
				t.Fatalf("cursor %v hotspot %v", d.cursor.Rect, d.hotspot)
			}
		}
	})
}

// FuzzMirrorApply drives the mirror's publishing with decoded updates and
// checks that, once synchronised, the mirror's frame always equals the
// client's framebuffer.
func FuzzMirrorApply(f *testing.F) {
	for _, s := range serverMessageSeeds {
		f.Add(cat(wireFBU(wireRawRect(0, 0, 16, 8, 0, 0, 0)), s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := fuzzLimits.withDefaults()
		c := &Client{dec: newDecoder(bufio.NewReader(bytes.NewReader(data)), lim, 16, 8)}
		m := NewMirror(MirrorOptions{})
		st := &sessionState{client: c, cov: newCoverage(image.Pt(16, 8))}
		var last uint64
		for range 64 {
			msg, err := c.dec.readMessage()
			if err != nil {
				return
			}
			u, ok := msg.(*FramebufferUpdate)
			if !ok {
				continue
			}
			m.apply(st, u)
			img, n := m.Frame(nil)
			if n < last {
				t.Fatalf("counter went back from %d to %d", last, n)
			}
			if st.cov == nil && !sameImage(img, c.Framebuffer()) {
				t.Fatal("mirror differs from the client's framebuffer")
			}
			if rects, ok := m.Damage(last); ok {
				for _, r := range rects {
					if !r.In(img.Rect) {
						t.Fatalf("damage %v outside %v", r, img.Rect)
					}
				}
			}
			last = n
		}
	})
}

func FuzzClientHandshake(f *testing.F) {
	for _, s := range [][]byte{wireHandshake38None, wireHandshake38VNCAuth, wireHandshake33VNCAuth,
		wireHandshake37None, wireHandshake38AuthFailed, wireHandshake38Refused} {
		f.Add(s, "")
		f.Add(s, "secret")
	}
	f.Fuzz(func(t *testing.T, data []byte, password string) {
		lim := fuzzLimits.withDefaults()
		var out bytes.Buffer
		si, err := clientHandshake(bytes.NewReader(data), &out, password, lim)
		if err == nil && (si.Width > lim.MaxWidth || si.Height > lim.MaxHeight || len(si.Name) > lim.MaxNameLength) {
			t.Fatalf("accepted %+v over the limits", si)
		}
	})
}

func FuzzAcceptViewer(f *testing.F) {
	for _, s := range [][]byte{wireViewer38None, wireViewer33, cat([]byte("RFB 003.008\n"), []byte{2}, make([]byte, 17))} {
		f.Add(s, "")
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, data []byte, password string) {
		var out bytes.Buffer
		_, _ = acceptViewer(bytes.NewReader(data), &out, password, fuzzLimits.withDefaults())
	})
}

// FuzzClientFilter checks that the proxy's framing does not depend on how
// the stream is cut, and that what it forwards is whole messages that pass
// the same filter unchanged.
func FuzzClientFilter(f *testing.F) {
	f.Add(cat(wireSetPixelFormatBGRX, wireKeyDownA, wireSetEncodingsWithEMB, wirePointerLeft, wireFBURIncremental,
		wireCutTextHi, wireQEMUKeyDownA, wireQEMUAudioFormat, wireFence, wireXVPReset, wireSetDesktopSize1,
		wireEnableCU, wireCutTextExtended), byte(3), true)
	f.Add(cat(wireKeyDownA, wireQEMUAudioEnable, []byte{9}), byte(1), false)
	f.Fuzz(func(t *testing.T, data []byte, chunk byte, viewOnly bool) {
		whole := &clientFilter{viewOnly: viewOnly, maxCutText: 4096}
		wantOut, wantErr := whole.feed(data)
		wantOut = bytes.Clone(wantOut)

		pieces := &clientFilter{viewOnly: viewOnly, maxCutText: 4096}
		n := int(chunk%16) + 1
		var got []byte
		var gotErr error
		for rest := data; len(rest) > 0 && gotErr == nil; {
			k := min(n, len(rest))
			var out []byte
			out, gotErr = pieces.feed(rest[:k])
			got = append(got, out...)
			rest = rest[k:]
		}
		if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, wantOut) {
			t.Fatalf("chunks of %d: %x (%v), whole: %x (%v)", n, got, gotErr, wantOut, wantErr)
		}
		again := &clientFilter{viewOnly: viewOnly, maxCutText: 4096}
		out, err := again.feed(wantOut)
		if err != nil || !bytes.Equal(out, wantOut) || len(again.pending) != 0 || again.dropped != 0 {
			t.Fatalf("forwarded stream does not pass again unchanged: %v", err)
		}
	})
}
