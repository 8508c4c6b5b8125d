// Package vnc speaks RFB 3.8 (RFC 6143) to QEMU's built-in VNC server, which
// is the single source of a desktop's screen.
//
// It holds three things:
//
//   - Client: the client side of one RFB connection (handshake.go,
//     messages_client.go, messages_server.go, encoding_*.go), decoding Raw,
//     CopyRect and the DesktopSize, ExtendedDesktopSize, Cursor, LastRect,
//     DesktopName and QEMU pseudo-encodings into an *image.RGBA.
//   - Mirror: one per running desktop; an always-current in-memory copy of the
//     framebuffer with a change counter and per-update damage, reconnecting
//     when QEMU's socket goes away and comes back. It satisfies
//     screenshot.Source without importing it.
//   - The viewer proxy: ServeWebSocket (noVNC) and ListenTCP (ordinary VNC
//     clients on 127.0.0.1) relay RFB between a viewer and a new connection
//     to the desktop's VNC socket, with a bounded queue per viewer and an
//     optional view-only filter on the viewer's messages.
//
// Every length a peer sends is capped by Limits; a stream that breaks the
// protocol or a limit ends its connection with an error wrapping ErrProtocol.
//
// # What QEMU 7.2 does
//
// Asked for Raw with the pseudo-encodings in MirrorEncodings, QEMU sends
// only Raw pixel rectangles (one rectangle for a full-screen change), an
// ExtendedDesktopSize rectangle after every non-incremental update request
// and on every mode change (std VGA starts at 640x480, SeaBIOS text is
// 720x400), and its extended-key acknowledgement right after SetEncodings.
// With -vga std there is no Cursor pseudo-encoding: the guest draws its
// pointer into the framebuffer. QEMU sends updates only on its refresh
// timer, at most about 33 a second, and the timer slows from 30 ms to 3 s
// while the screen is idle; Mirror.Poke resets it (see there).
//
// # Security of the proxy
//
// The proxy terminates both RFB handshakes. Toward the desktop it uses
// QEMU's password, if any; toward viewers it offers security None
// (ServeWebSocket, for requests the caller has authenticated) or VNC
// Authentication with its own password (ListenTCP always, since every user
// of the host can reach a loopback port). Viewers therefore never learn
// QEMU's password.
package vnc
