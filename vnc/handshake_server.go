package vnc

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"
)

// The server side of RFC 6143 sections 7.1 to 7.3, which the proxy plays
// toward viewers: the proxy terminates the viewer's security handshake itself
// (None for WebSocket viewers that web/ has authenticated, VNC Authentication
// with a per-listener password on TCP), so viewers never learn QEMU's
// password and the proxy needs to frame only the message phase.

// acceptViewer offers version 3.8 and one security type (VNC Authentication
// when password is non-empty, None otherwise), and reads ClientInit. The
// caller then writes ServerInit. It returns the negotiated minor version.
func acceptViewer(r io.Reader, w io.Writer, password string, lim Limits) (int, error) {
	if _, err := w.Write(appendProtocolVersion(nil, 8)); err != nil {
		return 0, fmt.Errorf("write protocol version: %w", err)
	}
	var buf [vncAuthChallengeLen]byte
	if _, err := io.ReadFull(r, buf[:protocolVersionLen]); err != nil {
		return 0, fmt.Errorf("read viewer protocol version: %w", err)
	}
	major, minor, err := parseProtocolVersion(buf[:protocolVersionLen])
	if err != nil {
		return 0, fmt.Errorf("viewer: %w", err)
	}
	if minor, err = negotiatedMinor(major, minor); err != nil {
		return 0, fmt.Errorf("viewer: %w", err)
	}

	sec := SecurityNone
	if password != "" {
		sec = SecurityVNCAuth
	}
	if minor == 3 {
		if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(sec))); err != nil {
			return 0, fmt.Errorf("write security type: %w", err)
		}
	} else {
		if _, err := w.Write([]byte{1, byte(sec)}); err != nil {
			return 0, fmt.Errorf("write security types: %w", err)
		}
		choice, err := readU8(r, buf[:])
		if err != nil {
			return 0, fmt.Errorf("read viewer security type: %w", err)
		}
		if SecurityType(choice) != sec {
			_ = writeSecurityFailure(w, minor, "security type not offered")
			return 0, fmt.Errorf("viewer chose security type %d, offered %d: %w", choice, sec, ErrProtocol)
		}
	}

	if sec == SecurityVNCAuth {
		challenge := make([]byte, vncAuthChallengeLen)
		if _, err := rand.Read(challenge); err != nil {
			return 0, fmt.Errorf("vnc auth challenge: %w", err)
		}
		if _, err := w.Write(challenge); err != nil {
			return 0, fmt.Errorf("write vnc auth challenge: %w", err)
		}
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return 0, fmt.Errorf("read vnc auth response: %w", err)
		}
		if subtle.ConstantTimeCompare(buf[:], vncAuthResponse(challenge, password)) != 1 {
			_ = writeSecurityFailure(w, minor, "authentication failed")
			return 0, fmt.Errorf("viewer gave a wrong password: %w", ErrAuthFailed)
		}
	}
	if sec == SecurityVNCAuth || minor == 8 {
		if _, err := w.Write([]byte{0, 0, 0, 0}); err != nil {
			return 0, fmt.Errorf("write security result: %w", err)
		}
	}

	// ClientInit; the shared flag is moot: the proxy always connects shared.
	if _, err := readU8(r, buf[:]); err != nil {
		return 0, fmt.Errorf("read client init: %w", err)
	}
	return minor, nil
}

// writeSecurityFailure sends SecurityResult "failed", with the reason that
// 3.8 carries.
func writeSecurityFailure(w io.Writer, minor int, reason string) error {
	b := binary.BigEndian.AppendUint32(nil, 1)
	if minor == 8 {
		b = appendString(b, reason)
	}
	_, err := w.Write(b)
	return err
}
