package vnc

// Limits caps every length field a peer can send, so a malformed or hostile
// stream ends its connection instead of allocating without bound. Zero fields
// take the defaults below.
type Limits struct {
	// MaxWidth and MaxHeight cap the framebuffer (default 8192 each; QEMU's
	// std VGA tops out well below).
	MaxWidth, MaxHeight int
	// MaxNameLength caps the desktop name in ServerInit and DesktopName
	// (default 4096; QEMU sends at most 1024).
	MaxNameLength int
	// MaxCutText caps ServerCutText and, in the proxy, ClientCutText
	// (default 1 MiB, QEMU's own limit for ClientCutText).
	MaxCutText int
	// MaxCursorSize caps each side of a Cursor pseudo-rectangle (default 512).
	MaxCursorSize int
	// MaxReasonLength caps failure reason strings (default 4096).
	MaxReasonLength int
}

const (
	defaultMaxDimension    = 8192
	defaultMaxNameLength   = 4096
	defaultMaxCutText      = 1 << 20
	defaultMaxCursorSize   = 512
	defaultMaxReasonLength = 4096
)

func (l Limits) withDefaults() Limits {
	if l.MaxWidth <= 0 {
		l.MaxWidth = defaultMaxDimension
	}
	if l.MaxHeight <= 0 {
		l.MaxHeight = defaultMaxDimension
	}
	if l.MaxNameLength <= 0 {
		l.MaxNameLength = defaultMaxNameLength
	}
	if l.MaxCutText <= 0 {
		l.MaxCutText = defaultMaxCutText
	}
	if l.MaxCursorSize <= 0 {
		l.MaxCursorSize = defaultMaxCursorSize
	}
	if l.MaxReasonLength <= 0 {
		l.MaxReasonLength = defaultMaxReasonLength
	}
	return l
}
