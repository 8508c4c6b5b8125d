package vnc

import "encoding/binary"

// clientFilter walks a viewer's message stream (after the handshake) with
// exact framing and decides what reaches the desktop. It always strips
// ExtendedMouseButtons from SetEncodings, because once a server confirms it
// PointerEvent grows a byte the proxy could only know about by watching the
// server's stream. In view-only mode it drops every message that would
// control the machine.
type clientFilter struct {
	viewOnly    bool
	allowResize bool
	maxCutText  int

	pending []byte // an incomplete message carried to the next feed
	out     []byte
	dropped uint64 // messages dropped, for stats
}

// feed frames p and returns the bytes to forward, valid until the next
// call. An error means the stream can no longer be framed; the bytes
// returned with it are the whole messages before the bad one.
func (f *clientFilter) feed(p []byte) ([]byte, error) {
	f.out = f.out[:0]
	data := p
	if len(f.pending) > 0 {
		f.pending = append(f.pending, p...)
		data = f.pending
	}
	consumed := 0
	for consumed < len(data) {
		need, err := clientMessageSize(data[consumed:], f.maxCutText)
		if err != nil {
			return f.out, err
		}
		if need > len(data)-consumed {
			break
		}
		f.out = f.apply(f.out, data[consumed:consumed+need])
		consumed += need
	}
	switch {
	case consumed == len(data):
		f.pending = f.pending[:0]
	case len(f.pending) == 0 || consumed > 0:
		// Moves within pending when data aliases it; append copes.
		f.pending = append(f.pending[:0], data[consumed:]...)
	}
	return f.out, nil
}

func (f *clientFilter) apply(out, msg []byte) []byte {
	switch msg[0] {
	case msgKeyEvent, msgPointerEvent, msgClientCutText:
		if f.viewOnly {
			return f.drop(out)
		}
	case msgClientQEMU:
		if f.viewOnly && msg[1] == qemuExtendedKeyEvent {
			return f.drop(out)
		}
	case msgClientXVP:
		// xvp asks QEMU to shut down or reset the machine.
		if f.viewOnly {
			return f.drop(out)
		}
	case msgSetDesktopSize:
		// A viewer's window size would change the agent's screen under it.
		if f.viewOnly || !f.allowResize {
			return f.drop(out)
		}
	case msgSetEncodings:
		return appendFilteredEncodings(out, msg)
	}
	return append(out, msg...)
}

func (f *clientFilter) drop(out []byte) []byte {
	f.dropped++
	return out
}

// appendFilteredEncodings appends SetEncodings msg without
// ExtendedMouseButtons.
func appendFilteredEncodings(out, msg []byte) []byte {
	start := len(out)
	out = append(out, msg[:4]...)
	kept := 0
	for i := 4; i+4 <= len(msg); i += 4 {
		if Encoding(int32(binary.BigEndian.Uint32(msg[i:]))) == EncodingExtendedMouseButtons {
			continue
		}
		out = append(out, msg[i:i+4]...)
		kept++
	}
	binary.BigEndian.PutUint16(out[start+2:], uint16(kept))
	return out
}
