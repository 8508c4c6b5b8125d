package vnc

import (
	"encoding/binary"
	"fmt"
)

// PixelFormat is RFC 6143 section 7.4, the layout of a pixel on the wire.
type PixelFormat struct {
	BitsPerPixel uint8
	Depth        uint8
	BigEndian    bool
	TrueColour   bool
	RedMax       uint16
	GreenMax     uint16
	BlueMax      uint16
	RedShift     uint8
	GreenShift   uint8
	BlueShift    uint8
}

// pixelFormatBGRX is the format Client asks for: 32-bit little-endian true
// colour with blue in the lowest byte, so pixels arrive as B, G, R, X. It
// is QEMU's own surface format (x8r8g8b8), for which QEMU's VNC server
// copies pixels instead of converting each one: a full 1280x800 update
// comes out faster and costs QEMU less. The decoder swaps red and blue
// into an *image.RGBA as it reads (the X byte becomes alpha 255).
var pixelFormatBGRX = PixelFormat{
	BitsPerPixel: 32, Depth: 24, TrueColour: true,
	RedMax: 255, GreenMax: 255, BlueMax: 255,
	RedShift: 16, GreenShift: 8, BlueShift: 0,
}

const pixelFormatLen = 16

func appendPixelFormat(b []byte, pf PixelFormat) []byte {
	b = append(b, pf.BitsPerPixel, pf.Depth, boolByte(pf.BigEndian), boolByte(pf.TrueColour))
	b = binary.BigEndian.AppendUint16(b, pf.RedMax)
	b = binary.BigEndian.AppendUint16(b, pf.GreenMax)
	b = binary.BigEndian.AppendUint16(b, pf.BlueMax)
	return append(b, pf.RedShift, pf.GreenShift, pf.BlueShift, 0, 0, 0)
}

func parsePixelFormat(b []byte) PixelFormat {
	_ = b[pixelFormatLen-1]
	return PixelFormat{
		BitsPerPixel: b[0],
		Depth:        b[1],
		BigEndian:    b[2] != 0,
		TrueColour:   b[3] != 0,
		RedMax:       binary.BigEndian.Uint16(b[4:]),
		GreenMax:     binary.BigEndian.Uint16(b[6:]),
		BlueMax:      binary.BigEndian.Uint16(b[8:]),
		RedShift:     b[10],
		GreenShift:   b[11],
		BlueShift:    b[12],
	}
}

// validate checks what RFC 6143 requires of a pixel format a server offers.
func (pf PixelFormat) validate() error {
	switch pf.BitsPerPixel {
	case 8, 16, 32:
	default:
		return fmt.Errorf("bits per pixel %d not 8, 16 or 32: %w", pf.BitsPerPixel, ErrProtocol)
	}
	if pf.Depth == 0 || pf.Depth > pf.BitsPerPixel {
		return fmt.Errorf("depth %d with %d bits per pixel: %w", pf.Depth, pf.BitsPerPixel, ErrProtocol)
	}
	return nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
