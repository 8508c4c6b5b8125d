package qemu

import (
	"bytes"
	"context"
	"image"
	"io"
	"log/slog"
	"net"

	"github.com/warmdesk/warmdesk/desktop"
)

// Helpers the libvirt driver (desktop/libvirt) shares with this one, so
// both drivers describe the same QEMU build the same way, speak the same
// QMP input and read the same screendumps: a snapshot made by either must
// restore on the other when their shapes match.

// ProbeShape identifies the QEMU build at binary (version, sha256 of the
// emulator, resolved q35 machine type) and chooses the accelerator ("auto",
// "kvm" or "tcg") exactly as this driver's New does.
func ProbeShape(ctx context.Context, binary, accel string, log *slog.Logger) (desktop.MachineShape, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return hostShape(ctx, Options{Binary: binary, Accel: accel, Logger: log})
}

// InputEvents builds the argument list ("events") of QMP input-send-event
// for one frame of input on a width x height screen.
func InputEvents(events []desktop.InputEvent, width, height int) ([]map[string]any, error) {
	return inputEvents(events, width, height)
}

// DecodePPM reads the binary PPM that QMP screendump writes.
func DecodePPM(r io.Reader) (image.Image, error) {
	img, err := decodePPM(r)
	if err != nil {
		return nil, err // not a typed nil inside a non-nil interface
	}
	return img, nil
}

// LogTail returns the last n lines of a log file, for error messages.
func LogTail(path string, n int) string { return logTail(path, n) }

// WatchLines reads conn (a serial console socket) in the background and
// calls fn with each line, until conn ends, ctx ends or done closes; an
// endless line is handed over in pieces.
func WatchLines(ctx context.Context, conn net.Conn, done <-chan struct{}, fn func(string)) {
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		conn.Close()
	}()
	go func() {
		defer conn.Close()
		buf := make([]byte, 0, 4096)
		chunk := make([]byte, 4096)
		for {
			n, err := conn.Read(chunk)
			buf = append(buf, chunk[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				fn(string(bytes.TrimRight(buf[:i], "\r")))
				buf = buf[i+1:]
			}
			if len(buf) > 4096 {
				fn(string(buf))
				buf = buf[:0]
			}
			if err != nil {
				return
			}
		}
	}()
}

// CreateOverlay makes a qcow2 overlay at path on a backing qcow2, with
// qemu-img.
func CreateOverlay(ctx context.Context, qemuImg, path, backing string) error {
	return createOverlay(ctx, qemuImg, path, backing)
}

// NextOverlayPath names the overlay that goes on top of path:
// disk-0.qcow2 -> disk-1.qcow2.
func NextOverlayPath(path string) string { return nextOverlayPath(path) }

// MachineDirs makes a machine's runtime and data directories (0700) under
// the two roots; on failure neither is left.
func MachineDirs(runRoot, dataRoot, id string) (runDir, dataDir string, err error) {
	return machineDirs(runRoot, dataRoot, id)
}

// RemoveDirs removes a machine's directories.
func RemoveDirs(dirs ...string) error { return removeDirs(dirs...) }

// CopySparse copies a file, keeping its holes, into a new file, synced.
func CopySparse(src, dst string) error { return copySparse(src, dst) }
