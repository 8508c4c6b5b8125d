package web

import (
	"fmt"
	"sync"
)

// Viewer caps by default (Config.MaxViewersPerDesktop, ...PerToken;
// --max-viewers-per-desktop, --max-viewers-per-token): each VNC WebSocket
// holds a connection to QEMU's VNC server and a stream of frames, so the
// viewers of one desktop, and of one per-desktop token, are bounded. The
// daemon's token counts only against its desktop's cap.
const (
	MaxViewersPerDesktop = 16
	MaxViewersPerToken   = 4
)

// viewerCount tracks open VNC WebSockets by desktop and by token.
type viewerCount struct {
	perDesktop, perToken int // the caps
	mu                   sync.Mutex
	byDesktop            map[string]int
	byToken              map[string]int
}

// newViewerCount is a count with these caps; 0 takes the default.
func newViewerCount(perDesktop, perToken int) *viewerCount {
	if perDesktop <= 0 {
		perDesktop = MaxViewersPerDesktop
	}
	if perToken <= 0 {
		perToken = MaxViewersPerToken
	}
	return &viewerCount{perDesktop: perDesktop, perToken: perToken, byDesktop: map[string]int{}, byToken: map[string]int{}}
}

// open claims a viewer slot of a desktop (and of a per-desktop token, by
// its signature; "" for the daemon's token), or says which cap is full.
func (v *viewerCount) open(desktop, token string) (release func(), err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byDesktop[desktop] >= v.perDesktop {
		return nil, fmt.Errorf("%s has %d viewers open, the most one desktop may have (--max-viewers-per-desktop): close one first", desktop, v.perDesktop)
	}
	if token != "" && v.byToken[token] >= v.perToken {
		return nil, fmt.Errorf("this token has %d viewers open, the most one share link may have (--max-viewers-per-token): close one first", v.perToken)
	}
	v.byDesktop[desktop]++
	if token != "" {
		v.byToken[token]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			v.mu.Lock()
			defer v.mu.Unlock()
			if v.byDesktop[desktop]--; v.byDesktop[desktop] == 0 {
				delete(v.byDesktop, desktop)
			}
			if token != "" {
				if v.byToken[token]--; v.byToken[token] == 0 {
					delete(v.byToken, token)
				}
			}
		})
	}, nil
}
