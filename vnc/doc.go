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
package vnc
