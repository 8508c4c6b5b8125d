package api

import "time"

// Event is an event as the API sends it (GET /v1/events, as server-sent
// events): most are about a desktop (Desktop set); a fleet host pulling a
// snapshot tells its progress (Pull set), before any desktop of it exists.
type Event struct {
	Type    string        `json:"type"`
	Desktop *Desktop      `json:"desktop,omitempty"`
	Pull    *SnapshotPull `json:"pull,omitempty"`
	// Host is the fleet host the event happened on (empty on a single
	// host).
	Host    string    `json:"host,omitempty"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary,omitempty"`
}

// The events of a snapshot pull, on the host that pulls.
const (
	EventPulling    = "snapshot.pulling" // started, then as its bytes arrive
	EventPulled     = "snapshot.pulled"
	EventPullFailed = "snapshot.pull_failed" // Summary says why
)

// EventFollowing: a host's event stream in a fleet now passes on another
// host's events (Summary: its address); the events that host sent while
// not followed are missed, so a client reloads what it shows.
const EventFollowing = "fleet.following"

// SnapshotPull is how far a fleet host has come pulling a snapshot from
// another: Bytes of Total, over all its files.
type SnapshotPull struct {
	Snapshot string `json:"snapshot"`
	From     string `json:"from"` // the host it comes from
	File     string `json:"file,omitempty"`
	Bytes    int64  `json:"bytes"`
	Total    int64  `json:"total"`
}

// SetControl is the body of POST /v1/desktops/{id}/control.
type SetControl struct {
	Holder string `json:"holder"` // "person" takes control, "agent" hands it back
	By     string `json:"by,omitempty"`
}

// IssueToken is the body of POST /v1/desktops/{id}/tokens.
type IssueToken struct {
	Role string   `json:"role"`
	TTL  Duration `json:"ttl,omitempty"`
}

// IssuedToken is its answer.
type IssuedToken struct {
	Token     string    `json:"token"`
	Role      string    `json:"role"`
	ExpiresAt time.Time `json:"expires_at"`
	// ViewerURL opens the viewer with the token in the URL fragment, which
	// browsers never send to servers or in Referer headers; the page moves
	// it to session storage and clears it from the address bar.
	ViewerURL string `json:"viewer_url"`
}

// VNCListener is the answer of POST /v1/desktops/{id}/vnc/tcp.
type VNCListener struct {
	Address  string `json:"address"`
	Password string `json:"password"`
	ViewOnly bool   `json:"view_only"`
}

// OpenVNCListener is its body.
type OpenVNCListener struct {
	// ViewOnly drops the clients' input (default true).
	ViewOnly *bool `json:"view_only,omitempty"`
}

// RotatedToken answers POST /v1/token/rotate: the daemon's new token.
type RotatedToken struct {
	Token string `json:"token"`
}

// DevToolsURL is a short-lived DevTools root for tools that cannot send an
// Authorization header (POST /v1/desktops/{id}/cdp/url): its token, a
// per-desktop shell token, is in the path.
type DevToolsURL struct {
	// EndpointURL is the http:// root: Playwright's connectOverCDP takes it.
	EndpointURL string `json:"endpoint_url"`
	// WebSocket is the browser's WebSocket: Puppeteer's browserWSEndpoint
	// and chromedp's remote allocator take it.
	WebSocket string    `json:"websocket_url"`
	ExpiresAt time.Time `json:"expires_at"`
}
