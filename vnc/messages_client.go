package vnc

import (
	"encoding/binary"
	"fmt"
	"image"
)

// RFC 6143 section 7.5, client-to-server messages, plus the extensions QEMU
// and noVNC use: their encoders, and the framing the proxy needs to walk a
// viewer's stream message by message.

// Client-to-server message types.
const (
	msgSetPixelFormat           uint8 = 0
	msgSetEncodings             uint8 = 2
	msgFramebufferUpdateRequest uint8 = 3
	msgKeyEvent                 uint8 = 4
	msgPointerEvent             uint8 = 5
	msgClientCutText            uint8 = 6
	msgEnableContinuousUpdates  uint8 = 150
	msgClientFence              uint8 = 248
	msgClientXVP                uint8 = 250
	msgSetDesktopSize           uint8 = 251
	msgClientQEMU               uint8 = 255

	// Submessages of msgClientQEMU.
	qemuExtendedKeyEvent uint8 = 0
	qemuAudio            uint8 = 1

	// Operations of qemuAudio.
	qemuAudioEnable    = 0
	qemuAudioDisable   = 1
	qemuAudioSetFormat = 2
)

// maxFencePayload is rfbproto's limit on a Fence message's payload.
const maxFencePayload = 64

func appendSetPixelFormat(b []byte, pf PixelFormat) []byte {
	b = append(b, msgSetPixelFormat, 0, 0, 0)
	return appendPixelFormat(b, pf)
}

func appendSetEncodings(b []byte, encs []Encoding) []byte {
	b = append(b, msgSetEncodings, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(encs)))
	for _, e := range encs {
		b = binary.BigEndian.AppendUint32(b, uint32(e))
	}
	return b
}

func appendFramebufferUpdateRequest(b []byte, incremental bool, r image.Rectangle) []byte {
	b = append(b, msgFramebufferUpdateRequest, boolByte(incremental))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Min.X))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Min.Y))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Dx()))
	return binary.BigEndian.AppendUint16(b, uint16(r.Dy()))
}

func appendKeyEvent(b []byte, down bool, keysym uint32) []byte {
	b = append(b, msgKeyEvent, boolByte(down), 0, 0)
	return binary.BigEndian.AppendUint32(b, keysym)
}

func appendPointerEvent(b []byte, buttons uint8, x, y uint16) []byte {
	b = append(b, msgPointerEvent, buttons)
	b = binary.BigEndian.AppendUint16(b, x)
	return binary.BigEndian.AppendUint16(b, y)
}

// appendClientCutText encodes text, which RFB defines as ISO 8859-1.
func appendClientCutText(b []byte, latin1 []byte) []byte {
	b = append(b, msgClientCutText, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(latin1)))
	return append(b, latin1...)
}

// appendQEMUExtendedKeyEvent encodes QEMU's key event with a raw keycode
// (XT scancode numbering, 0xe0-prefixed codes as 0x80|code) next to the
// keysym, so that no keymap is involved.
func appendQEMUExtendedKeyEvent(b []byte, down bool, keysym, keycode uint32) []byte {
	b = append(b, msgClientQEMU, qemuExtendedKeyEvent, 0, boolByte(down))
	b = binary.BigEndian.AppendUint32(b, keysym)
	return binary.BigEndian.AppendUint32(b, keycode)
}

// latin1 converts UTF-8 text to ISO 8859-1, replacing what it cannot carry
// with '?'.
func latin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			r = '?'
		}
		out = append(out, byte(r))
	}
	return out
}

// clientMessageSize reports the length of the client message at the start of
// b. When b is too short to tell, it returns a smaller length that is more
// than len(b): read at least that much and ask again. A result of at most
// len(b) is the whole message. Unknown types and lengths over maxCutText are
// errors: the stream cannot be framed past them.
func clientMessageSize(b []byte, maxCutText int) (int, error) {
	if len(b) < 1 {
		return 1, nil
	}
	switch b[0] {
	case msgSetPixelFormat:
		return 20, nil
	case msgSetEncodings:
		if len(b) < 4 {
			return 4, nil
		}
		return 4 + 4*int(binary.BigEndian.Uint16(b[2:])), nil
	case msgFramebufferUpdateRequest:
		return 10, nil
	case msgKeyEvent:
		return 8, nil
	case msgPointerEvent:
		return 6, nil
	case msgClientCutText:
		if len(b) < 8 {
			return 8, nil
		}
		// A negative length is QEMU's and noVNC's extended clipboard; its
		// magnitude is the payload length either way.
		n := int64(int32(binary.BigEndian.Uint32(b[4:])))
		if n < 0 {
			n = -n
		}
		if n > int64(maxCutText) {
			return 0, fmt.Errorf("client cut text of %d bytes over the limit of %d: %w", n, maxCutText, ErrProtocol)
		}
		return 8 + int(n), nil
	case msgEnableContinuousUpdates:
		return 10, nil
	case msgClientFence:
		if len(b) < 9 {
			return 9, nil
		}
		n := int(b[8])
		if n > maxFencePayload {
			return 0, fmt.Errorf("fence payload of %d bytes over %d: %w", n, maxFencePayload, ErrProtocol)
		}
		return 9 + n, nil
	case msgClientXVP:
		return 4, nil
	case msgSetDesktopSize:
		if len(b) < 8 {
			return 8, nil
		}
		return 8 + 16*int(b[6]), nil
	case msgClientQEMU:
		if len(b) < 2 {
			return 2, nil
		}
		switch b[1] {
		case qemuExtendedKeyEvent:
			return 12, nil
		case qemuAudio:
			if len(b) < 4 {
				return 4, nil
			}
			switch binary.BigEndian.Uint16(b[2:]) {
			case qemuAudioEnable, qemuAudioDisable:
				return 4, nil
			case qemuAudioSetFormat:
				return 10, nil
			default:
				return 0, fmt.Errorf("qemu audio operation %d: %w", binary.BigEndian.Uint16(b[2:]), ErrProtocol)
			}
		default:
			return 0, fmt.Errorf("qemu client submessage %d: %w", b[1], ErrProtocol)
		}
	default:
		return 0, fmt.Errorf("client message type %d: %w", b[0], ErrProtocol)
	}
}
