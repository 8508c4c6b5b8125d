package desktop

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test with errors.Is; web/ maps them to HTTP
// statuses. Every error carries a message saying what was wrong and what to
// do; the sentinel only classifies it.
var (
	// ErrNotFound: no desktop or snapshot by that id or name.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a request value is malformed or out of range.
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: the request is illegal in the desktop's current state
	// (resume a running desktop, fork a hibernated one, remove a snapshot in
	// use).
	ErrConflict = errors.New("conflict")
	// ErrCapacity: the host-wide cap on desktops or memory would be exceeded.
	ErrCapacity = errors.New("over capacity")
	// ErrNoSpace: the disk that holds the state directory has less free
	// space than the configured reserve.
	ErrNoSpace = errors.New("not enough free disk space")
	// ErrMismatch: a snapshot was made by another QEMU build, machine type,
	// device list or accelerator than this host would restore it with, or
	// its files do not match their checksums.
	ErrMismatch = errors.New("snapshot mismatch")
	// ErrUnavailable: a dependency (QEMU, libvirtd, the guest agent) did not
	// answer in time.
	ErrUnavailable = errors.New("unavailable")
	// ErrBusy: the host's CPUs stayed contended beyond the admission bound
	// for the queue's wait (a *BusyError says how much and for how long).
	ErrBusy = errors.New("host CPU busy")
	// ErrControlled: a person holds control of the desktop, so agent input
	// is refused until they hand it back.
	ErrControlled = errors.New("a person is in control")
	// ErrNotHere: the desktop's record belongs to another host of the
	// fleet (it moved there).
	ErrNotHere = errors.New("the desktop's record belongs to another host")
)

// TransitionError is returned for an illegal state transition.
type TransitionError struct {
	ID     string
	From   State
	Action string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s desktop %s: it is %s", e.Action, e.ID, e.From)
}

// Unwrap makes a TransitionError an ErrConflict.
func (e *TransitionError) Unwrap() error { return ErrConflict }
