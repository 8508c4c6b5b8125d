package vnc

import "errors"

var (
	// ErrProtocol marks a peer that broke RFB framing or one of Limits. The
	// connection it came from is closed.
	ErrProtocol = errors.New("rfb protocol violation")
	// ErrAuthFailed means the server refused our credentials, or a viewer
	// gave the wrong password.
	ErrAuthFailed = errors.New("rfb authentication failed")
	// ErrNotConnected is returned by Mirror's send methods while no
	// connection to the server is up.
	ErrNotConnected = errors.New("vnc server not connected")
	// ErrUnsupported is returned for a request the server did not agree to,
	// such as QEMU extended key events on a server that never acknowledged
	// them.
	ErrUnsupported = errors.New("not supported by the vnc server")
	// ErrSlowViewer ends a proxied viewer whose queue of unsent server data
	// went over its budget.
	ErrSlowViewer = errors.New("viewer fell behind")
)
