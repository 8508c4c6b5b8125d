package vnc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"image"
	"io"
)

// RFC 6143 section 7.6, server-to-client messages, read and applied to the
// client's framebuffer by decoder.

// Server-to-client message types.
const (
	msgFramebufferUpdate   uint8 = 0
	msgSetColourMapEntries uint8 = 1
	msgBell                uint8 = 2
	msgServerCutText       uint8 = 3
)

// ServerMessage is one message from the server, as returned by
// Client.ReadMessage: *FramebufferUpdate, *SetColourMapEntries, *Bell or
// *ServerCutText.
type ServerMessage interface {
	serverMessageType() uint8
}

// FramebufferUpdate reports one FramebufferUpdate message (section 7.6.1)
// after all its rectangles have been applied to the client's framebuffer.
// It is reused by the next ReadMessage.
type FramebufferUpdate struct {
	// Damage lists the pixel rectangles written, in order, inside the
	// framebuffer. After a resize it holds only those that followed it.
	Damage []image.Rectangle
	// Resized is set when the framebuffer changed size in this update: the
	// client then holds a new, black framebuffer until rectangles fill it.
	Resized bool
	// CursorChanged is set when a Cursor pseudo-rectangle arrived.
	CursorChanged bool
	// ExtendedKeyEvents is set when QEMU acknowledged its extended key
	// event pseudo-encoding.
	ExtendedKeyEvents bool
	// Pixels is set when any rectangle carried pixel data; an update
	// without is only a notice (QEMU sends several unasked).
	Pixels bool
	// Rectangles counts the rectangles in the message, pseudo ones included.
	Rectangles int
}

// SetColourMapEntries is section 7.6.2. Its colours are skipped: the client
// always asks for true colour.
type SetColourMapEntries struct {
	FirstColour, Colours int
}

// Bell is section 7.6.3.
type Bell struct{}

// ServerCutText is section 7.6.4: the server's clipboard, ISO 8859-1.
type ServerCutText struct {
	Text []byte
}

func (*FramebufferUpdate) serverMessageType() uint8   { return msgFramebufferUpdate }
func (*SetColourMapEntries) serverMessageType() uint8 { return msgSetColourMapEntries }
func (*Bell) serverMessageType() uint8                { return msgBell }
func (*ServerCutText) serverMessageType() uint8       { return msgServerCutText }

// decoder reads server messages from r and applies them to fb. Only one
// goroutine uses it. Pixels arrive in pixelFormatBGRX, which the client
// sets before asking for any.
type decoder struct {
	r   *bufio.Reader
	lim Limits
	fb  *image.RGBA

	cursor    *image.RGBA
	hotspot   image.Point
	hasCursor bool
	name      string
	ledState  int

	update  FramebufferUpdate
	scratch []byte
	hdr     [12]byte // for fixed-size fields; a local array would escape
}

const bytesPerPixel = 4

func newDecoder(r *bufio.Reader, lim Limits, width, height int) *decoder {
	return &decoder{
		r:        r,
		lim:      lim,
		fb:       image.NewRGBA(image.Rect(0, 0, width, height)),
		ledState: -1,
	}
}

// rectHeader is section 7.6.1's rectangle header.
type rectHeader struct {
	x, y, w, h int
	enc        Encoding
}

func (h rectHeader) rect() image.Rectangle { return image.Rect(h.x, h.y, h.x+h.w, h.y+h.h) }

func (d *decoder) readMessage() (ServerMessage, error) {
	b := d.hdr[:]
	t, err := readU8(d.r, b)
	if err != nil {
		return nil, fmt.Errorf("read message type: %w", err)
	}
	switch t {
	case msgFramebufferUpdate:
		if err := d.readFramebufferUpdate(); err != nil {
			return nil, fmt.Errorf("framebuffer update: %w", err)
		}
		return &d.update, nil
	case msgSetColourMapEntries:
		if _, err := io.ReadFull(d.r, b[:5]); err != nil {
			return nil, fmt.Errorf("read set colour map entries: %w", err)
		}
		m := &SetColourMapEntries{
			FirstColour: int(binary.BigEndian.Uint16(b[1:])),
			Colours:     int(binary.BigEndian.Uint16(b[3:])),
		}
		if _, err := d.r.Discard(6 * m.Colours); err != nil {
			return nil, fmt.Errorf("read colour map: %w", err)
		}
		return m, nil
	case msgBell:
		return &Bell{}, nil
	case msgServerCutText:
		if _, err := io.ReadFull(d.r, b[:7]); err != nil {
			return nil, fmt.Errorf("read server cut text: %w", err)
		}
		n := binary.BigEndian.Uint32(b[3:])
		if uint64(n) > uint64(d.lim.MaxCutText) {
			return nil, fmt.Errorf("server cut text of %d bytes over the limit of %d: %w", n, d.lim.MaxCutText, ErrProtocol)
		}
		text := make([]byte, n)
		if _, err := io.ReadFull(d.r, text); err != nil {
			return nil, fmt.Errorf("read server cut text: %w", err)
		}
		return &ServerCutText{Text: text}, nil
	default:
		return nil, fmt.Errorf("server message type %d: %w", t, ErrProtocol)
	}
}

func (d *decoder) readFramebufferUpdate() error {
	b := d.hdr[:]
	if _, err := io.ReadFull(d.r, b[:3]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	d.update = FramebufferUpdate{Damage: d.update.Damage[:0]}
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(d.r, b[:12]); err != nil {
			return fmt.Errorf("read rectangle header %d of %d: %w", i+1, n, err)
		}
		h := rectHeader{
			x:   int(binary.BigEndian.Uint16(b[0:])),
			y:   int(binary.BigEndian.Uint16(b[2:])),
			w:   int(binary.BigEndian.Uint16(b[4:])),
			h:   int(binary.BigEndian.Uint16(b[6:])),
			enc: Encoding(int32(binary.BigEndian.Uint32(b[8:]))),
		}
		d.update.Rectangles++
		if h.enc == EncodingLastRect {
			return nil
		}
		if err := d.readRect(h); err != nil {
			return fmt.Errorf("rectangle %d of %d (%s %dx%d at %d,%d): %w", i+1, n, h.enc, h.w, h.h, h.x, h.y, err)
		}
	}
	return nil
}

func (d *decoder) readRect(h rectHeader) error {
	switch h.enc {
	case EncodingRaw:
		return d.readRaw(h)
	case EncodingCopyRect:
		return d.readCopyRect(h)
	case EncodingDesktopSize:
		return d.resize(h.w, h.h)
	case EncodingExtendedDesktopSize:
		return d.readExtendedDesktopSize(h)
	case EncodingCursor:
		return d.readCursor(h)
	case EncodingDesktopName:
		name, err := readString(d.r, d.lim.MaxNameLength)
		if err != nil {
			return err
		}
		d.name = name
		return nil
	case EncodingQEMUExtendedKeyEvent:
		d.update.ExtendedKeyEvents = true
		return nil
	case EncodingPointerTypeChange, EncodingQEMUAudio:
		// Notices without payload that the client only gets if it asked.
		return nil
	case EncodingQEMULEDState:
		var b [1]byte
		if _, err := io.ReadFull(d.r, b[:]); err != nil {
			return err
		}
		d.ledState = int(b[0])
		return nil
	default:
		return fmt.Errorf("encoding not advertised: %w", ErrProtocol)
	}
}

// inside checks a pixel rectangle against the framebuffer.
func (d *decoder) inside(r image.Rectangle) error {
	if !r.In(d.fb.Rect) && !r.Empty() {
		return fmt.Errorf("rectangle %v outside the %dx%d framebuffer: %w", r, d.fb.Rect.Dx(), d.fb.Rect.Dy(), ErrProtocol)
	}
	return nil
}

func (d *decoder) addDamage(r image.Rectangle) {
	d.update.Pixels = true
	if !r.Empty() {
		d.update.Damage = append(d.update.Damage, r)
	}
}

// resize replaces the framebuffer with a black one of the new size, unless
// the size is unchanged (QEMU repeats the current size unasked).
func (d *decoder) resize(w, h int) error {
	if w > d.lim.MaxWidth || h > d.lim.MaxHeight {
		return fmt.Errorf("new framebuffer %dx%d over the limit of %dx%d: %w", w, h, d.lim.MaxWidth, d.lim.MaxHeight, ErrProtocol)
	}
	if w == d.fb.Rect.Dx() && h == d.fb.Rect.Dy() {
		return nil
	}
	d.fb = image.NewRGBA(image.Rect(0, 0, w, h))
	d.update.Resized = true
	d.update.Damage = d.update.Damage[:0]
	return nil
}

// scratchN returns a reusable buffer of n bytes; n is always bounded by
// Limits before this is called.
func (d *decoder) scratchN(n int) []byte {
	if cap(d.scratch) < n {
		d.scratch = make([]byte, n)
	}
	return d.scratch[:n]
}
