package web

import (
	"fmt"
	"sync"
)

// Viewer caps: each VNC WebSocket holds a connection to QEMU's VNC server
// and a stream of frames, so the viewers of one desktop, and of one
// per-desktop token, are bounded. The daemon's token counts only against
// its desktop's cap.
const (
	MaxViewersPerDesktop = 16
	MaxViewersPerToken   = 4
)

// viewerCount tracks open VNC WebSockets by desktop and by token.
type viewerCount struct {
	mu        sync.Mutex
	byDesktop map[string]int
	byToken   map[string]int
}

// open claims a viewer slot of a desktop (and of a per-desktop token, by
// its signature; "" for the daemon's token), or says which cap is full.
func (v *viewerCount) open(desktop, token string) (release func(), err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byDesktop == nil {
		v.byDesktop, v.byToken = map[string]int{}, map[string]int{}
	}
	if v.byDesktop[desktop] >= MaxViewersPerDesktop {
		return nil, fmt.Errorf("%s has %d viewers open, the most one desktop may have: close one first", desktop, MaxViewersPerDesktop)
	}
	if token != "" && v.byToken[token] >= MaxViewersPerToken {
		return nil, fmt.Errorf("this token has %d viewers open, the most one share link may have: close one first", MaxViewersPerToken)
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
