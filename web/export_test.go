package web

import "time"

// SplitEventsForTest reads server-sent events as a fleet host does.
var SplitEventsForTest = splitEvents

// SetPeerRefreshForTest sets how often a fleet's event stream lists the
// hosts again, and returns the function that puts it back.
func SetPeerRefreshForTest(d time.Duration) func() {
	was := peerRefresh
	peerRefresh = d
	return func() { peerRefresh = was }
}
