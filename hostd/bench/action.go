package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/web"
)

// actionSamples is the number of requests per action measurement.
const actionSamples = 50

// actionSuite measures the action path through the real HTTP API and the
// control WebSocket, served in-process by the same web server hostd runs:
//
//   - action_http / action_ws: a one-move batch, client round trip;
//   - action_server: request in to input delivered (QEMU answered the
//     input-send-event), as the server reports it;
//   - batch_*: a click plus a trailing settled screenshot; the wait for the
//     screen (the guest's rendering plus the quiet period) is reported
//     apart from everything else, which is the harness's overhead.
func (e *env) actionSuite(ctx context.Context) error {
	d, _, _, err := e.liveDesktop(ctx)
	if err != nil {
		return err
	}
	defer e.mgr.Delete(context.WithoutCancel(ctx), d.ID)
	const token = "bench-token"
	svc := drive.New(ctx, drive.Config{Manager: e.mgr, Screens: e.screens, Logger: e.log})
	srv := httptest.NewServer(web.New(web.Config{Manager: e.mgr, Drive: svc, Token: token, Logger: e.log}).Handler())
	defer srv.Close()
	url := srv.URL + "/v1/desktops/" + d.ID + "/actions"

	post := func(body string) (api.ActionsResponse, time.Duration, error) { return postBatch(ctx, url, token, body) }
	move := func(i int) string {
		return fmt.Sprintf(`{"actions":[{"action":"move","x":%d,"y":%d}]}`, 600+(i%2)*100, 600)
	}

	var httpRT, server Dist
	for i := 0; i < actionSamples; i++ {
		out, took, err := post(move(i))
		if err != nil {
			return err
		}
		httpRT.Add(took)
		if len(out.Results) == 1 {
			server.Add(time.Duration(out.Results[0].ElapsedMs * float64(time.Millisecond)))
		}
	}
	e.res.dist("action_http", &httpRT)
	e.res.dist("action_server", &server)
	e.progress("  HTTP move: round trip p50 %s, server side p50 %s", httpRT.Percentile(50), server.Percentile(50))

	ws, err := e.controlRoundTrips(ctx, srv.URL, d.ID, token, move)
	if err != nil {
		return err
	}
	e.res.dist("action_ws", ws)
	e.progress("  WebSocket move: round trip p50 %s", ws.Percentile(50))

	// A batch that changes the screen (a click in the xterm moves the
	// pointer), then a settled screenshot.
	var total, render, overhead Dist
	for i := 0; i < actionSamples/2; i++ {
		body := fmt.Sprintf(`{"actions":[{"action":"click","x":%d,"y":300}],"screenshot":true,"settle_ms":300,"timeout_ms":5000}`, 200+(i%2)*300)
		out, took, err := post(body)
		if err != nil {
			return err
		}
		if out.Screenshot == nil || out.Screenshot.Settle == nil {
			return fmt.Errorf("a batch with screenshot:true came back without a settled screenshot")
		}
		st := out.Screenshot.Settle
		wait := time.Duration(st.WaitedMs * float64(time.Millisecond))
		quiet := time.Duration(st.QuietMs) * time.Millisecond
		total.Add(took)
		render.Add(max(wait-quiet, 0))
		overhead.Add(max(took-wait, 0))
	}
	e.res.dist("batch_total", &total)
	e.res.dist("batch_guest_render", &render)
	e.res.dist("batch_overhead", &overhead)
	e.progress("  batch with settled screenshot: total p50 %s, guest render p50 %s, overhead p50 %s",
		total.Percentile(50), render.Percentile(50), overhead.Percentile(50))
	if err := e.recordingCost(ctx, d.ID, func(body string) error {
		_, _, err := post(body)
		return err
	}); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	if err := e.accessibilityWalk(ctx, svc); err != nil {
		return err
	}
	if err := e.clickTypeSuite(ctx, srv.URL, token); err != nil {
		return err
	}
	return e.devtoolsSuite(ctx, srv.URL, token)
}

// controlRoundTrips sends one-move batches on the control WebSocket, one
// at a time, and times each answer.
func (e *env) controlRoundTrips(ctx context.Context, base, id, token string, move func(int) string) (*Dist, error) {
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/v1/desktops/" + id + "/control"
	dialer := websocket.Dialer{Subprotocols: []string{"warmdesk.v1"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.DialContext(ctx, wsURL, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("control WebSocket: HTTP %d: %w", resp.StatusCode, err)
		}
		return nil, fmt.Errorf("control WebSocket: %w", err)
	}
	defer conn.Close()
	var d Dist
	for i := 0; i < actionSamples; i++ {
		reqID := "m" + strconv.Itoa(i)
		msg := bytes.TrimPrefix([]byte(move(i)), []byte("{"))
		frame := append([]byte(`{"id":"`+reqID+`","type":"actions",`), msg...)
		conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			return nil, err
		}
		for {
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			var reply api.ControlReply
			if err := conn.ReadJSON(&reply); err != nil {
				return nil, fmt.Errorf("control WebSocket: %w", err)
			}
			if reply.ID != reqID {
				continue // hello and screen events
			}
			if reply.Type != "result" {
				return nil, fmt.Errorf("control WebSocket: %s: %+v", reply.Type, reply.Error)
			}
			d.Add(time.Since(start))
			break
		}
	}
	return &d, nil
}
