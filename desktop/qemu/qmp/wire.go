package qmp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// message is any line QEMU sends: the greeting, a command's return or
// error, or an event.
type message struct {
	QMP *struct {
		Version struct {
			QEMU    versionTriple `json:"qemu"`
			Package string        `json:"package"`
		} `json:"version"`
		Capabilities []string `json:"capabilities"`
	} `json:"QMP"`
	Return    json.RawMessage `json:"return"`
	Error     *Error          `json:"error"`
	ID        *uint64         `json:"id"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

type versionTriple struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
	Micro int `json:"micro"`
}

func (v versionTriple) toVersion(pkg string) Version {
	return Version{Major: v.Major, Minor: v.Minor, Micro: v.Micro, Package: pkg}
}

var errTooLong = errors.New("qmp: message too long")

// readLine reads one newline-terminated message, refusing any longer than
// maxMessage.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxMessage {
			return nil, errTooLong
		}
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(buf)) == 0 {
			buf = buf[:0]
			continue
		}
		return buf, nil
	}
}

// parseMessage decodes one message and checks it is one of the kinds QMP
// defines.
func parseMessage(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("qmp: malformed message %.80q: %w", line, err)
	}
	kinds := 0
	if m.QMP != nil {
		kinds++
	}
	if m.Event != "" {
		kinds++
	}
	if m.Return != nil || m.Error != nil {
		kinds++
		if m.ID == nil {
			// We always send ids; a reply without one is not ours.
			return message{}, fmt.Errorf("qmp: reply without id: %.80q", line)
		}
	}
	if kinds != 1 {
		return message{}, fmt.Errorf("qmp: not a greeting, reply or event: %.80q", line)
	}
	return m, nil
}

// encodeCommand builds one command line.
func encodeCommand(command string, args any, id uint64) ([]byte, error) {
	cmd := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
		ID        uint64 `json:"id"`
	}{command, args, id}
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: encode arguments: %w", command, err)
	}
	return append(b, '\r', '\n'), nil
}
