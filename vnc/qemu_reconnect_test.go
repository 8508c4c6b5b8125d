package vnc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// A viewer that reconnects back to back always gets in: QEMU's VNC socket
// listens with a backlog of one, and a connection it has not yet taken in
// made the next connect fail with EAGAIN (a 502 about one time in four
// from hostd). The first viewers hang up right after the upgrade, the
// rest after a whole handshake and a first frame, as noVNC does when it
// reconnects.
func TestQEMUProxyViewerReconnectsBackToBack(t *testing.T) {
	vm := startQEMU(t, qemuOptions{boot: true})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	waitBootedPainter(t, vm, m)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ServeWebSocket(w, r, vm.dial, ProxyOptions{Logger: testLogger(t), ViewOnly: true})
	}))
	t.Cleanup(hs.Close)
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	const quick, opens = 16, 24
	statuses := make([]int, 0, opens)
	refused := 0
	for i := range opens {
		if i >= quick {
			v := dialRFBViewer(t, url)
			v.request(t, false)
			v.v.ws.Close()
			statuses = append(statuses, http.StatusSwitchingProtocols)
			continue
		}
		ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		statuses = append(statuses, status)
		if err != nil {
			refused++
			continue
		}
		ws.Close()
	}
	if refused > 0 {
		t.Fatalf("%d of %d opens refused: statuses %v", refused, opens, statuses)
	}
}
