package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/web"
)

// Over the CPU bound a create answers 503 cpu_busy with Retry-After and
// the pressure, and adds no desktop; GET /v1/host and /metrics show the
// pressure, the bound and the refusal; once the pressure falls, the next
// create goes through.
func TestCreateOverTheCPUBoundAnswers503(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lim := desktop.DefaultLimits()
	lim.PoolSize, lim.MinFreeMiB = 0, 0
	lim.MaxCPUPressure, lim.CPUQueueWait = 0.5, 50*time.Millisecond
	gauge := desktoptest.NewGauge(0.2)
	cpu := desktop.NewCPUAdmission(gauge, lim)
	mgr, _ := fakeManager(t, ctx, desktop.Config{Limits: lim, CPU: cpu})
	defer mgr.Close()
	svc := drive.New(ctx, drive.Config{Manager: mgr, Screens: &drivetest.Screens{Default: drivetest.NewScreen(64, 48)}})
	hs := httptest.NewServer(web.New(web.Config{Manager: mgr, Drive: svc, Token: actToken, CPU: cpu, Limits: lim}).Handler())
	defer hs.Close()
	c := client.New(hs.URL, actToken)

	if _, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: "snap"}); err != nil {
		t.Fatalf("create under the bound: %v", err)
	}
	gauge.Set(0.95)
	req, _ := http.NewRequest("POST", hs.URL+"/v1/desktops", strings.NewReader(`{"snapshot": "snap"}`))
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" ||
		!strings.Contains(string(body), `"code":"cpu_busy"`) || !strings.Contains(string(body), `"cpu_pressure":0.95`) {
		t.Fatalf("create over the bound: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if n := len(mgr.List()); n != 1 {
		t.Errorf("%d desktops after the refusal, want 1", n)
	}
	host, err := c.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if host.Desktops != 1 || host.MaxDesktops != lim.MaxDesktops || host.CPU.Pressure != 0.95 || host.CPU.Bound != 0.5 || host.CPU.Refused != 1 || host.CPU.WindowS != 10 {
		t.Errorf("host %+v", host)
	}
	mreq, _ := http.NewRequest("GET", hs.URL+"/metrics", nil)
	mreq.Header.Set("Authorization", "Bearer "+actToken)
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"warmdesk_cpu_pressure 0.95", "warmdesk_cpu_pressure_bound 0.5", "warmdesk_cpu_refused_total 1", "warmdesk_cpu_queue 0"} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	gauge.Set(0.3)
	if _, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: "snap"}); err != nil {
		t.Fatalf("create with the pressure down: %v", err)
	}
}
