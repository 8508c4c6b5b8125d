package vnc

import (
	"encoding/binary"
	"fmt"
	"io"
)

// RFC 6143 section 7.1 (handshake messages), 7.2 (security types) and 7.3
// (initialisation messages), from the client's side.

// SecurityType is an RFB security type (RFC 6143 section 7.2).
type SecurityType uint8

const (
	SecurityInvalid SecurityType = 0
	SecurityNone    SecurityType = 1
	SecurityVNCAuth SecurityType = 2
)

// ServerInit is RFC 6143 section 7.3.2: the framebuffer's size, the server's
// natural pixel format and the desktop's name.
type ServerInit struct {
	Width, Height int
	PixelFormat   PixelFormat
	Name          string
}

const protocolVersionLen = 12

// parseProtocolVersion parses "RFB xxx.yyy\n".
func parseProtocolVersion(b []byte) (major, minor int, err error) {
	if len(b) != protocolVersionLen || string(b[:4]) != "RFB " || b[7] != '.' || b[11] != '\n' {
		return 0, 0, fmt.Errorf("protocol version %q: %w", b, ErrProtocol)
	}
	digits := func(d []byte) (int, bool) {
		n := 0
		for _, c := range d {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	major, ok1 := digits(b[4:7])
	minor, ok2 := digits(b[8:11])
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("protocol version %q: %w", b, ErrProtocol)
	}
	return major, minor, nil
}

// negotiatedMinor maps a peer's version to the one both speak: 3.8, 3.7 or
// 3.3. RFC 6143 section 7.1.1 says versions other than 3.3, 3.7 and 3.8 are
// to be treated as 3.3 (some clients report 3.4 or 3.5, for example).
func negotiatedMinor(major, minor int) (int, error) {
	switch {
	case major < 3:
		return 0, fmt.Errorf("protocol version %d.%d older than 3.3: %w", major, minor, ErrProtocol)
	case major > 3 || minor >= 8:
		return 8, nil
	case minor == 7:
		return 7, nil
	default:
		return 3, nil
	}
}

func appendProtocolVersion(b []byte, minor int) []byte {
	return fmt.Appendf(b, "RFB 003.%03d\n", minor)
}

// clientHandshake runs the handshake and initialisation as the client,
// always asking for a shared session. A non-empty password selects VNC
// Authentication when the server offers it.
func clientHandshake(r io.Reader, w io.Writer, password string, lim Limits) (ServerInit, error) {
	var buf [protocolVersionLen]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return ServerInit{}, fmt.Errorf("read protocol version: %w", err)
	}
	major, minor, err := parseProtocolVersion(buf[:])
	if err != nil {
		return ServerInit{}, err
	}
	minor, err = negotiatedMinor(major, minor)
	if err != nil {
		return ServerInit{}, err
	}
	if _, err := w.Write(appendProtocolVersion(nil, minor)); err != nil {
		return ServerInit{}, fmt.Errorf("write protocol version: %w", err)
	}

	sec, err := clientSecurity(r, w, minor, password, lim)
	if err != nil {
		return ServerInit{}, err
	}
	if sec == SecurityVNCAuth {
		var challenge [vncAuthChallengeLen]byte
		if _, err := io.ReadFull(r, challenge[:]); err != nil {
			return ServerInit{}, fmt.Errorf("read vnc auth challenge: %w", err)
		}
		if _, err := w.Write(vncAuthResponse(challenge[:], password)); err != nil {
			return ServerInit{}, fmt.Errorf("write vnc auth response: %w", err)
		}
	}
	// Section 7.1.3: 3.8 always sends SecurityResult; 3.3 and 3.7 only
	// after an authentication that can fail.
	if minor == 8 || sec == SecurityVNCAuth {
		result, err := readU32(r, buf[:])
		if err != nil {
			return ServerInit{}, fmt.Errorf("read security result: %w", err)
		}
		if result != 0 {
			reason := ""
			if minor == 8 {
				reason, err = readString(r, lim.MaxReasonLength)
				if err != nil {
					return ServerInit{}, fmt.Errorf("read security failure reason: %w", err)
				}
			}
			return ServerInit{}, fmt.Errorf("security result %d %q: %w", result, reason, ErrAuthFailed)
		}
	}

	// ClientInit, section 7.3.1: shared, so other viewers stay connected.
	if _, err := w.Write([]byte{1}); err != nil {
		return ServerInit{}, fmt.Errorf("write client init: %w", err)
	}
	return readServerInit(r, lim)
}

// clientSecurity reads the server's security types and picks one.
func clientSecurity(r io.Reader, w io.Writer, minor int, password string, lim Limits) (SecurityType, error) {
	var scratch [4]byte
	if minor == 3 {
		// Section 7.1.2 for 3.3: the server decides, as a u32.
		t, err := readU32(r, scratch[:])
		if err != nil {
			return 0, fmt.Errorf("read security type: %w", err)
		}
		switch SecurityType(t) {
		case SecurityInvalid:
			reason, err := readString(r, lim.MaxReasonLength)
			if err != nil {
				return 0, fmt.Errorf("read connection failure reason: %w", err)
			}
			return 0, fmt.Errorf("server refused the connection: %q: %w", reason, ErrProtocol)
		case SecurityNone:
			return SecurityNone, nil
		case SecurityVNCAuth:
			if password == "" {
				return 0, fmt.Errorf("server requires a vnc password and none is configured: %w", ErrAuthFailed)
			}
			return SecurityVNCAuth, nil
		default:
			return 0, fmt.Errorf("security type %d: %w", t, ErrUnsupported)
		}
	}
	n, err := readU8(r, scratch[:])
	if err != nil {
		return 0, fmt.Errorf("read security type count: %w", err)
	}
	if n == 0 {
		reason, err := readString(r, lim.MaxReasonLength)
		if err != nil {
			return 0, fmt.Errorf("read connection failure reason: %w", err)
		}
		return 0, fmt.Errorf("server refused the connection: %q: %w", reason, ErrProtocol)
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(r, types); err != nil {
		return 0, fmt.Errorf("read security types: %w", err)
	}
	var haveNone, haveVNC bool
	for _, t := range types {
		haveNone = haveNone || SecurityType(t) == SecurityNone
		haveVNC = haveVNC || SecurityType(t) == SecurityVNCAuth
	}
	var choice SecurityType
	switch {
	case haveVNC && password != "":
		choice = SecurityVNCAuth
	case haveNone:
		choice = SecurityNone
	case haveVNC:
		return 0, fmt.Errorf("server requires a vnc password and none is configured: %w", ErrAuthFailed)
	default:
		return 0, fmt.Errorf("security types %v offer neither None nor VNC Authentication: %w", types, ErrUnsupported)
	}
	if _, err := w.Write([]byte{byte(choice)}); err != nil {
		return 0, fmt.Errorf("write security type: %w", err)
	}
	return choice, nil
}

const serverInitFixedLen = 2 + 2 + pixelFormatLen + 4

func readServerInit(r io.Reader, lim Limits) (ServerInit, error) {
	var b [serverInitFixedLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return ServerInit{}, fmt.Errorf("read server init: %w", err)
	}
	si := ServerInit{
		Width:       int(binary.BigEndian.Uint16(b[0:])),
		Height:      int(binary.BigEndian.Uint16(b[2:])),
		PixelFormat: parsePixelFormat(b[4:]),
	}
	if si.Width > lim.MaxWidth || si.Height > lim.MaxHeight {
		return ServerInit{}, fmt.Errorf("server init: framebuffer %dx%d over the limit of %dx%d: %w",
			si.Width, si.Height, lim.MaxWidth, lim.MaxHeight, ErrProtocol)
	}
	if err := si.PixelFormat.validate(); err != nil {
		return ServerInit{}, fmt.Errorf("server init: %w", err)
	}
	nameLen := binary.BigEndian.Uint32(b[4+pixelFormatLen:])
	if uint64(nameLen) > uint64(lim.MaxNameLength) {
		return ServerInit{}, fmt.Errorf("server init: name of %d bytes over the limit of %d: %w",
			nameLen, lim.MaxNameLength, ErrProtocol)
	}
	name := make([]byte, nameLen)
	if _, err := io.ReadFull(r, name); err != nil {
		return ServerInit{}, fmt.Errorf("read server init name: %w", err)
	}
	si.Name = string(name)
	return si, nil
}

func appendServerInit(b []byte, si ServerInit) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(si.Width))
	b = binary.BigEndian.AppendUint16(b, uint16(si.Height))
	b = appendPixelFormat(b, si.PixelFormat)
	return appendString(b, si.Name)
}
