package vnc

import "strconv"

// Encoding is an RFB encoding type (RFC 6143 section 7.7), a signed 32-bit
// number on the wire. Negative numbers are mostly pseudo-encodings: the
// client advertises them to say it understands a message carried as a
// rectangle.
type Encoding int32

// Encodings from RFC 6143 section 7.7 and 7.8 and the community registry
// (rfbproto), including QEMU's own.
const (
	EncodingRaw         Encoding = 0
	EncodingCopyRect    Encoding = 1
	EncodingRRE         Encoding = 2
	EncodingHextile     Encoding = 5
	EncodingZlib        Encoding = 6
	EncodingTight       Encoding = 7
	EncodingZRLE        Encoding = 16
	EncodingDesktopSize Encoding = -223
	EncodingLastRect    Encoding = -224
	EncodingCursor      Encoding = -239
	// EncodingPointerTypeChange is QEMU's notice of absolute or relative
	// pointer. Advertising it changes how QEMU reads PointerEvent in relative
	// mode, so the mirror does not.
	EncodingPointerTypeChange    Encoding = -257
	EncodingQEMUExtendedKeyEvent Encoding = -258
	EncodingQEMUAudio            Encoding = -259
	// EncodingQEMULEDState carries the guest's keyboard LEDs. Advertising it
	// turns off QEMU's lock-key synchronisation, so the mirror does not.
	EncodingQEMULEDState        Encoding = -261
	EncodingDesktopName         Encoding = -307
	EncodingExtendedDesktopSize Encoding = -308
	EncodingXVP                 Encoding = -309
	EncodingFence               Encoding = -312
	EncodingContinuousUpdates   Encoding = -313
	// EncodingExtendedMouseButtons makes PointerEvent one byte longer once
	// the server confirms it; the proxy strips it from viewers' SetEncodings
	// so that it can frame their messages without watching the server.
	EncodingExtendedMouseButtons Encoding = -316
	EncodingExtendedClipboard    Encoding = -1063131698 // 0xC0A1E5CE
)

// MirrorEncodings is what Client advertises by default: Raw, the cheapest on
// a local socket, plus the pseudo-encodings a mirror needs.
var MirrorEncodings = []Encoding{
	EncodingRaw,
	EncodingCopyRect,
	EncodingExtendedDesktopSize,
	EncodingDesktopSize,
	EncodingCursor,
	EncodingQEMUExtendedKeyEvent,
	EncodingLastRect,
	EncodingDesktopName,
}

var encodingNames = map[Encoding]string{
	EncodingRaw:                  "Raw",
	EncodingCopyRect:             "CopyRect",
	EncodingRRE:                  "RRE",
	EncodingHextile:              "Hextile",
	EncodingZlib:                 "Zlib",
	EncodingTight:                "Tight",
	EncodingZRLE:                 "ZRLE",
	EncodingDesktopSize:          "DesktopSize",
	EncodingLastRect:             "LastRect",
	EncodingCursor:               "Cursor",
	EncodingPointerTypeChange:    "QEMUPointerTypeChange",
	EncodingQEMUExtendedKeyEvent: "QEMUExtendedKeyEvent",
	EncodingQEMUAudio:            "QEMUAudio",
	EncodingQEMULEDState:         "QEMULEDState",
	EncodingDesktopName:          "DesktopName",
	EncodingExtendedDesktopSize:  "ExtendedDesktopSize",
	EncodingXVP:                  "xvp",
	EncodingFence:                "Fence",
	EncodingContinuousUpdates:    "ContinuousUpdates",
	EncodingExtendedMouseButtons: "ExtendedMouseButtons",
	EncodingExtendedClipboard:    "ExtendedClipboard",
}

func (e Encoding) String() string {
	if name, ok := encodingNames[e]; ok {
		return name
	}
	return "Encoding(" + strconv.Itoa(int(e)) + ")"
}
