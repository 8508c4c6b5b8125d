// Package qemuvm holds the facts about warmdesk's QEMU machine that every
// driver shares, so that a snapshot made by one driver restores on another:
// the device list and the fixed ids it refers to, memory and network
// arguments, identifying a QEMU build and choosing its accelerator, QMP
// input events, screendumps, migrations (capabilities, bandwidth, waiting
// for the end), disk overlays and frozen layers, machine directories, log
// tails and the serial console.
//
// The parts that speak QMP are written once against Executor and Monitor:
// the QEMU driver implements them over its own QMP socket, the libvirt
// driver over libvirt's monitor passthrough (QEMUDomainMonitorCommand) and
// its QEMU event stream. qemuvmtest has a fake Monitor for unit tests.
package qemuvm

import (
	"context"
	"encoding/json"
)

// Executor runs one QMP command: args and result are JSON-encoded values
// (either may be nil); an error QEMU returns comes back as an error.
type Executor interface {
	Execute(ctx context.Context, command string, args, result any) error
}

// Events is a subscription to a machine's QMP events.
type Events interface {
	// Wait returns the data of the next event named name. It fails when
	// ctx ends, or when the stream ends (the machine or the connection to
	// it is gone).
	Wait(ctx context.Context, name string) (json.RawMessage, error)
	// Close ends the subscription.
	Close()
}

// Monitor is a machine's QMP monitor: commands and events.
type Monitor interface {
	Executor
	// Subscribe delivers the events from now on, so an event a later
	// command causes cannot be missed.
	Subscribe(ctx context.Context) (Events, error)
}

// Status is QEMU's run state ("running", "paused", "inmigrate", ...).
func Status(ctx context.Context, ex Executor) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	if err := ex.Execute(ctx, "query-status", nil, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}
