package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A serving hostd admits creates by the host's CPU pressure: while a hog
// keeps the pressure over the bound, a create answers 503 cpu_busy with
// Retry-After and the pressure measured; once the hog ends and the
// pressure falls, the next create runs a desktop.
func TestCreatesAreAdmittedByCPU(t *testing.T) {
	cfg, snap := hostConfig(t, "qemu", "minimal")
	cfg.Listen = "127.0.0.1:0"
	cfg.Limits.MaxCPUPressure = 0.5
	cfg.Limits.CPUQueueWait = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := app.Open(ctx, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	addr, served := make(chan string, 1), make(chan error, 1)
	go func() { served <- a.Serve(serveCtx, func(s string) { addr <- s }) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
		a.Close()
	}()
	var base string
	select {
	case base = <-addr:
	case err := <-served:
		t.Fatal(err)
	}
	c := client.New(base, a.Token)

	endHog := hogCPUs(ctx, t)
	waitPressure(ctx, t, c, "over the bound", func(p float64) bool { return p >= cfg.Limits.MaxCPUPressure })
	body, _ := json.Marshal(api.CreateDesktop{Snapshot: snap})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/desktops", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer api.Error
	json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	refused := answer.Error
	if resp.StatusCode != http.StatusServiceUnavailable || refused.Code != "cpu_busy" || refused.CPUPressure < cfg.Limits.MaxCPUPressure {
		t.Fatalf("create under the hog: %d %+v; want 503 cpu_busy with the pressure", resp.StatusCode, refused)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q: want whole seconds", resp.Header.Get("Retry-After"))
	}
	t.Logf("refused: %s", refused.Message)

	endHog()
	waitPressure(ctx, t, c, "under the bound", func(p float64) bool { return p < cfg.Limits.MaxCPUPressure })
	// Other load on a shared host may push the pressure back over: a
	// refusal is tried again, as its Retry-After says, for a minute.
	var d api.Desktop
	var apiErr *client.Error
	retry := time.Now().Add(time.Minute)
	for {
		if d, err = c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap}); err == nil ||
			!errors.As(err, &apiErr) || apiErr.Code != "cpu_busy" || time.Now().After(retry) {
			break
		}
		t.Logf("refused again: %v", err)
		waitPressure(ctx, t, c, "under the bound", func(p float64) bool { return p < cfg.Limits.MaxCPUPressure })
	}
	if err != nil {
		t.Fatalf("create after the hog: %v", err)
	}
	if err := c.DeleteDesktop(ctx, d.ID); err != nil {
		t.Error(err)
	}
	host, err := c.Host(ctx)
	if err != nil || host.CPU.Refused < 1 {
		t.Errorf("GET /v1/host cpu after a refusal: %+v, %v", host.CPU, err)
	}
}

// hogCPUs spins one more process than the host has CPUs, until the
// returned func (or the test) ends them.
func hogCPUs(ctx context.Context, t *testing.T) (end func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range runtime.NumCPU() + 1 {
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var once sync.Once
	end = func() {
		once.Do(func() {
			for _, cmd := range cmds {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
	}
	t.Cleanup(end)
	return end
}

// waitPressure polls GET /v1/host until the CPU pressure satisfies ok.
func waitPressure(ctx context.Context, t *testing.T, c *client.Client, what string, ok func(float64) bool) {
	t.Helper()
	var last api.HostCPU
	if !testenv.Poll(2*time.Minute, 200*time.Millisecond, time.Second, func() bool {
		h, err := c.Host(ctx)
		last = h.CPU
		return err == nil && ok(h.CPU.Pressure)
	}) {
		t.Fatalf("the CPU pressure never went %s: last %+v", what, last)
	}
}
