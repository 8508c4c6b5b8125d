package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/e2b"
	"github.com/warmdesk/warmdesk/web"
)

//go:embed e2b_desktop.mjs
var e2bDesktopScript []byte

// E2B suite sizes: fresh sandboxes, and rounds of each call on each.
const (
	e2bSamples = 3
	e2bRounds  = 5
)

// e2bKeys are the suite's distributions, each timed by the script.
var e2bKeys = []string{"create", "api_create", "sdk_screenshot", "sdk_screenshot_guest", "api_screenshot", "sdk_left_click", "sdk_left_click_guest", "api_click"}

// e2bSuite runs E2B's own @e2b/desktop against the E2B front door on the
// e2b-desktop recipe's snapshot: Sandbox.create() to the SDK returning
// beside hostd's own create, and its screenshot() and leftClick(), with
// the fast paths and with every command in the guest, beside hostd's own
// screenshot and click on the same desktops, in one run.
func (e *env) e2bSuite(ctx context.Context) error {
	null := func(why string) error {
		for _, k := range e2bKeys {
			e.res.null("e2b_"+k+"_p50_ms", why)
		}
		return nil
	}
	snap, err := e.cat.Get(e.opts.E2BSnapshot)
	if err != nil {
		return null(fmt.Sprintf("no %q snapshot (hostd image build -f examples/recipes/e2b-desktop.yaml; hostd snapshot bake --image e2b-desktop)", e.opts.E2BSnapshot))
	}
	if err := e.cat.Verify(snap); err != nil {
		return err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return null("no node on PATH (scripts/setup installs Node and examples/e2b's SDKs)")
	}
	dir, err := filepath.Abs(e.opts.E2BDir)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@e2b", "desktop"))
	}
	if err != nil {
		return null(fmt.Sprintf("no @e2b/desktop in %s (scripts/setup runs npm ci there): %v", e.opts.E2BDir, err))
	}
	script := filepath.Join(e.runDir, "e2b_desktop.mjs")
	if err := os.WriteFile(script, e2bDesktopScript, 0o644); err != nil {
		return err
	}
	defer os.Remove(script)

	srvCtx, stop := context.WithCancel(ctx)
	defer stop()
	svc := drive.New(srvCtx, drive.Config{Manager: e.mgr, Screens: e.screens, Logger: e.log})
	token := "wd_bench"
	serve := func(guestOnly bool) *httptest.Server {
		return httptest.NewServer(web.New(web.Config{Manager: e.mgr, Drive: svc, Token: token, Logger: e.log,
			E2B: func(daemonToken func() string, _ func(context.Context) ([]desktop.Desktop, error)) http.Handler {
				return e2b.New(srvCtx, e2b.Config{Desktops: e.mgr, Events: e.mgr.Events(), Guest: svc, DaemonToken: daemonToken,
					Templates: map[string]string{"desktop": snap.Name}, GuestOnly: guestOnly, Logger: e.log})
			}}).Handler())
	}
	srv, guestSrv := serve(false), serve(true)
	defer srv.Close()
	defer guestSrv.Close()
	// Creates take a machine from the warm pool, as on a serving hostd:
	// two, for the SDK's create and hostd's own one after it; the rounds
	// that follow give the pool time to refill.
	e.drv.Warm(snap, 2)
	defer e.drv.Warm(snap, 0)
	if err := e.drv.WaitPool(ctx, snap.Name, 2); err != nil {
		return err
	}

	runCtx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, node, script)
	cmd.Env = append(os.Environ(), "E2B_DIR="+dir, "HOSTD_URL="+srv.URL, "HOSTD_TOKEN="+token,
		"E2B_API_URL="+srv.URL+"/e2b", "E2B_SANDBOX_URL="+srv.URL+"/e2b", "E2B_API_KEY=e2b_"+token,
		"E2B_GUEST_URL="+guestSrv.URL+"/e2b", "SNAPSHOT="+snap.Name,
		"SAMPLES="+strconv.Itoa(e2bSamples), "ROUNDS="+strconv.Itoa(e2bRounds))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	dists := map[string]*Dist{}
	for _, k := range e2bKeys {
		dists[k] = &Dist{}
	}
	var made []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		var m struct {
			What string   `json:"what"`
			MS   *float64 `json:"ms"`
			ID   string   `json:"id"`
		}
		if json.Unmarshal(lines.Bytes(), &m) != nil {
			continue
		}
		if m.ID != "" {
			made = append(made, m.ID)
		}
		if d, ok := dists[m.What]; ok && m.MS != nil {
			d.Add(time.Duration(*m.MS * float64(time.Millisecond)))
		}
	}
	runErr := cmd.Wait()
	for _, id := range made {
		if err := e.mgr.Delete(context.WithoutCancel(ctx), id); err != nil && !isNotFound(err) && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return fmt.Errorf("@e2b/desktop: %w: %s", runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	for _, k := range e2bKeys {
		e.res.dist("e2b_"+k, dists[k])
	}
	for key, pair := range map[string][2]string{
		"e2b_create_sdk_over_api_ratio":       {"create", "api_create"},
		"e2b_screenshot_sdk_over_api_ratio":   {"sdk_screenshot", "api_screenshot"},
		"e2b_screenshot_guest_over_api_ratio": {"sdk_screenshot_guest", "api_screenshot"},
		"e2b_click_sdk_over_api_ratio":        {"sdk_left_click", "api_click"},
		"e2b_click_guest_over_api_ratio":      {"sdk_left_click_guest", "api_click"},
	} {
		if p := dists[pair[1]].Percentile(50); p > 0 {
			e.res.set(key, float64(dists[pair[0]].Percentile(50))/float64(p))
		}
	}
	p50 := func(k string) time.Duration { return dists[k].Percentile(50).Round(time.Millisecond) }
	e.progress("  @e2b/desktop: Sandbox.create() p50 %s beside hostd's create %s; screenshot() p50 %s (in the guest %s) beside hostd's %s; leftClick() p50 %s (in the guest %s) beside hostd's click %s",
		p50("create"), p50("api_create"), p50("sdk_screenshot"), p50("sdk_screenshot_guest"), p50("api_screenshot"),
		p50("sdk_left_click"), p50("sdk_left_click_guest"), p50("api_click"))
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, desktop.ErrNotFound) }
