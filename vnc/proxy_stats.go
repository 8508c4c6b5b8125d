package vnc

import "sync/atomic"

// ProxyStats counts one desktop's proxied viewers. Give every
// ProxyOptions for a desktop the same *ProxyStats; a nil one counts nothing.
type ProxyStats struct {
	viewers          atomic.Int64
	viewersTotal     atomic.Uint64
	slowViewersCut   atomic.Uint64
	bytesToViewers   atomic.Uint64
	bytesFromViewers atomic.Uint64
	messagesDropped  atomic.Uint64
}

// ProxyStatsSnapshot is a copy of ProxyStats at one moment.
type ProxyStatsSnapshot struct {
	Viewers          int64  // connected now, past the handshake
	ViewersTotal     uint64 // ever connected past the handshake
	SlowViewersCut   uint64 // cut off for falling behind
	BytesToViewers   uint64
	BytesFromViewers uint64
	// MessagesDropped counts viewer messages not forwarded: input from
	// view-only viewers, and SetDesktopSize unless allowed.
	MessagesDropped uint64
}

// Snapshot returns the current counts.
func (s *ProxyStats) Snapshot() ProxyStatsSnapshot {
	if s == nil {
		return ProxyStatsSnapshot{}
	}
	return ProxyStatsSnapshot{
		Viewers:          s.viewers.Load(),
		ViewersTotal:     s.viewersTotal.Load(),
		SlowViewersCut:   s.slowViewersCut.Load(),
		BytesToViewers:   s.bytesToViewers.Load(),
		BytesFromViewers: s.bytesFromViewers.Load(),
		MessagesDropped:  s.messagesDropped.Load(),
	}
}

func (s *ProxyStats) viewerStarted() {
	if s != nil {
		s.viewers.Add(1)
		s.viewersTotal.Add(1)
	}
}

func (s *ProxyStats) viewerEnded(slow bool) {
	if s != nil {
		s.viewers.Add(-1)
		if slow {
			s.slowViewersCut.Add(1)
		}
	}
}

func (s *ProxyStats) addToViewers(n int) {
	if s != nil {
		s.bytesToViewers.Add(uint64(n))
	}
}

func (s *ProxyStats) addFromViewers(n int) {
	if s != nil {
		s.bytesFromViewers.Add(uint64(n))
	}
}

func (s *ProxyStats) addDropped(n uint64) {
	if s != nil && n > 0 {
		s.messagesDropped.Add(n)
	}
}
