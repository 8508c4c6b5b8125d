package qemu

import (
	"context"
	"image"
	"io"
	"log/slog"

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
