package web_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/web"
)

// TestSoakOnTheFakeDriver runs 50 clients against the real server, Manager
// and drive service on the fake driver, each creating, driving, picturing,
// forking, watching and deleting desktops, for WARMDESK_SOAK. No request
// may fail, and at the end no desktop, goroutine or descriptor is left
// beyond what was there before.
func TestSoakOnTheFakeDriver(t *testing.T) {
	dur := testenv.SoakDuration(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lim := desktop.DefaultLimits()
	lim.PoolSize, lim.MaxDesktops, lim.MaxMemoryMiB, lim.MinFreeMiB = 0, 1000, 1<<30, 0
	mgr, drv := fakeManager(t, ctx, desktop.Config{Limits: lim})
	defer mgr.Close()
	drivetest.NewGuest(drv)
	screens := &drivetest.Screens{Default: drivetest.NewScreen(1280, 800)}
	svc := drive.New(ctx, drive.Config{Manager: mgr, Screens: screens, KeystrokeInterval: time.Microsecond, KeyReaction: 20 * time.Millisecond})
	hs := httptest.NewServer(web.New(web.Config{Manager: mgr, Drive: svc, Token: actToken}).Handler())
	defer hs.Close()
	c := client.New(hs.URL, actToken)

	baseGoroutines, baseFDs := runtime.NumGoroutine(), testenv.OpenFDs(t)
	const clients = 50
	var ops, failures atomic.Int64
	var firstErr sync.Once
	var first error
	fail := func(what string, err error) {
		failures.Add(1)
		firstErr.Do(func() { first = fmt.Errorf("%s: %w", what, err) })
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(deadline) {
				soakRound(ctx, c, hs.URL, r, &ops, fail)
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed; the first: %v", n, ops.Load(), first)
	}
	if ds, err := c.Desktops(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("after the soak: desktops %d, %v; want none", len(ds), err)
	}
	if n := drv.Live(); n != 0 {
		t.Fatalf("after the soak: %d fake machines still live", n)
	}
	hs.CloseClientConnections()
	http.DefaultClient.CloseIdleConnections()
	var goroutines, fds int
	settled := testenv.Poll(30*time.Second, 10*time.Millisecond, 500*time.Millisecond, func() bool {
		goroutines, fds = runtime.NumGoroutine(), testenv.OpenFDs(t)
		return goroutines <= baseGoroutines+5 && fds <= baseFDs+5
	})
	t.Logf("%d clients, %s: %d requests, none failed; goroutines %d before, %d after; descriptors %d before, %d after",
		clients, dur, ops.Load(), baseGoroutines, goroutines, baseFDs, fds)
	if !settled {
		buf := make([]byte, 1<<20)
		t.Fatalf("leaked: goroutines %d (before %d), descriptors %d (before %d)\n%s", goroutines, baseGoroutines, fds, baseFDs, buf[:runtime.Stack(buf, true)])
	}
}

// soakRound is one client's round: create, drive, picture, maybe fork and
// watch, delete.
func soakRound(ctx context.Context, c *client.Client, base string, r *rand.Rand, ops *atomic.Int64, fail func(string, error)) {
	do := func(what string, err error) bool {
		ops.Add(1)
		if err != nil {
			fail(what, err)
			return false
		}
		return true
	}
	d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: "snap"})
	if !do("create", err) {
		return
	}
	defer func() { do("delete "+d.ID, c.DeleteDesktop(ctx, d.ID)) }()
	batch := input.Batch{{Kind: input.KindMove, At: &input.Point{X: r.IntN(1280), Y: r.IntN(800)}}, {Kind: input.KindClick, At: &input.Point{X: r.IntN(1280), Y: r.IntN(800)}}}
	_, err = c.Actions(ctx, d.ID, api.ActionsRequest{Actions: batch})
	do("actions", err)
	_, _, err = c.Screenshot(ctx, d.ID, nil, false)
	do("screenshot", err)
	if r.IntN(4) == 0 {
		copies, err := c.Fork(ctx, d.ID, 1)
		if do("fork", err) {
			for _, cp := range copies {
				do("delete fork "+cp.ID, c.DeleteDesktop(ctx, cp.ID))
			}
		}
	}
	if r.IntN(4) == 0 {
		do("viewer socket", watchViewer(ctx, base, d.ID))
	}
}

// watchViewer opens a desktop's viewer socket. The fake screen has no VNC
// server, so the server must refuse it with 502 before upgrading: a
// viewer slot that leaked on that path would turn later answers into 429.
func watchViewer(ctx context.Context, base, id string) error {
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/desktops/" + id + "/vnc"
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + actToken}})
	if err == nil {
		ws.Close()
		return errors.New("viewer socket upgraded, though the desktop has no VNC server")
	}
	if resp == nil || resp.StatusCode != http.StatusBadGateway {
		status := "no answer"
		if resp != nil {
			status = resp.Status
		}
		return fmt.Errorf("viewer socket: %s, want 502: %w", status, err)
	}
	return nil
}

// fakeManager is a Manager of cfg on the fake driver with one baked
// snapshot, "snap"; cfg's driver, store and catalog are filled in.
func fakeManager(t *testing.T, ctx context.Context, cfg desktop.Config) (*desktop.Manager, *desktoptest.Fake) {
	t.Helper()
	drv := desktoptest.NewFake()
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desktoptest.BakeFake(ctx, drv, cat, "snap"); err != nil {
		t.Fatal(err)
	}
	cfg.Driver, cfg.Store, cfg.Catalog = drv, desktoptest.NewMemStore(), cat
	return desktop.NewManager(ctx, cfg), drv
}
