package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"net/http"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// clickTypeSamples is the number of click-then-type batches on Chromium,
// each on a fresh desktop.
const clickTypeSamples = 8

// clickTypeSuite measures what keys after a click cost on Chromium: the
// time a batch of a click into the browser image's start page field and a
// typed word waits for the guest (the pointer seen read, then the page's
// reaction; the server's sync_ms), and the whole batch. Then the reverse,
// a click after keys: a batch of a typed letter and a click in the field,
// whose wait is the press's for the guest to take the keys. It needs the
// browser snapshot in the catalog; without it the keys are null.
func (e *env) clickTypeSuite(ctx context.Context, base, token string) error {
	snap, ok, err := e.browserSnapshot("click_type_sync_p50_ms")
	if !ok {
		e.res.null("type_click_sync_p50_ms", "no browser snapshot (see click_type_sync_p50_ms)")
	}
	if !ok || err != nil {
		return err
	}
	var sync, total, typeClick Dist
	for i := 0; i < clickTypeSamples; i++ {
		d, err := e.mgr.Create(ctx, desktop.CreateRequest{Snapshot: snap.Name})
		if err != nil {
			return err
		}
		url := base + "/v1/desktops/" + d.ID + "/actions"
		field, err := e.startPageField(ctx, d.ID)
		if err == nil {
			var took time.Duration
			took, err = e.syncedBatch(ctx, url, token, "click_type", &sync,
				fmt.Sprintf(`{"actions":[{"action":"click","x":%d,"y":%d},{"action":"type","text":"bench%d"}]}`, field.X, field.Y, i))
			total.Add(took)
		}
		if err == nil {
			_, err = e.syncedBatch(ctx, url, token, "type_click", &typeClick,
				fmt.Sprintf(`{"actions":[{"action":"type","text":"!"},{"action":"click","x":%d,"y":%d}]}`, field.X, field.Y))
		}
		if derr := e.mgr.Delete(context.WithoutCancel(ctx), d.ID); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
	e.res.dist("click_type_sync", &sync)
	e.res.dist("click_type_total", &total)
	e.res.dist("type_click_sync", &typeClick)
	e.progress("  click then type on Chromium: waited for the guest p50 %s, batch p50 %s; a click after keys waited p50 %s", sync.Percentile(50), total.Percentile(50), typeClick.Percentile(50))
	return nil
}

// syncedBatch posts one batch, adds the time the server says it waited
// for the guest to sync, notes its warnings under name, and returns its
// round trip.
func (e *env) syncedBatch(ctx context.Context, url, token, name string, sync *Dist, body string) (time.Duration, error) {
	out, took, err := postBatch(ctx, url, token, body)
	if err != nil {
		return 0, err
	}
	sync.Add(time.Duration(out.SyncMs * float64(time.Millisecond)))
	if len(out.Warnings) > 0 {
		e.res.note(name + ": " + strings.Join(out.Warnings, "; "))
	}
	return took, nil
}

// startPageField finds the start page's text field on a new browser
// desktop: the first row with a long white run (the page is not white).
func (e *env) startPageField(ctx context.Context, id string) (image.Point, error) {
	scr, ok := e.screens.Get(id)
	if !ok {
		return image.Point{}, fmt.Errorf("desktop %s has no screen", id)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitNonBlank(wctx, scr.Mirror); err != nil {
		return image.Point{}, err
	}
	img, _ := scr.Mirror.Frame(nil)
	if p, ok := whiteField(img, 100, 100); ok {
		return p, nil
	}
	return image.Point{}, fmt.Errorf("desktop %s: no text field on the start page", id)
}

// whiteField returns a point inside the first white run of at least minRun
// pixels at or below fromY.
func whiteField(img *image.RGBA, fromY, minRun int) (image.Point, bool) {
	b := img.Bounds()
	for y := fromY; y < b.Max.Y; y++ {
		run := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := img.RGBAAt(x, y); c.R > 250 && c.G > 250 && c.B > 250 {
				run++
				continue
			}
			if run >= minRun {
				return image.Pt(x-run/2, y+8), true
			}
			run = 0
		}
	}
	return image.Point{}, false
}

// postBatch posts one batch and times the round trip.
func postBatch(ctx context.Context, url, token, body string) (api.ActionsResponse, time.Duration, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.ActionsResponse{}, 0, err
	}
	defer resp.Body.Close()
	var out api.ActionsResponse
	err = json.NewDecoder(resp.Body).Decode(&out)
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return out, took, fmt.Errorf("actions: HTTP %d: %+v", resp.StatusCode, out.Error)
	}
	return out, took, err
}

// browserSnapshot finds the browser snapshot a suite needs; without it the
// suite's key is null with a note saying how to make one.
func (e *env) browserSnapshot(key string) (desktop.Snapshot, bool, error) {
	snap, err := e.cat.Get(e.opts.BrowserSnapshot)
	if err != nil {
		e.res.null(key, fmt.Sprintf("no %q snapshot (hostd image build --flavor browser; hostd snapshot bake --image browser)", e.opts.BrowserSnapshot))
		return snap, false, nil
	}
	return snap, true, e.cat.Verify(snap)
}
