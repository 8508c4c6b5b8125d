package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// TestSmokeEverySuite runs each suite with two samples on the minimal
// image, so the harness itself cannot rot: every documented key of the
// suites that ran comes out as a number, or null with a note. The trials
// and the busy suite's loaded phases have tests of their own
// (TestTrialsLandEveryTime, TestBusyHostKeepsItsPromises); here the busy
// and browsertool suites, without a browser snapshot, only answer null.
func TestSmokeEverySuite(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	state := testenv.DataDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, Options{
		Paths:        config.Paths{StateDir: state, CacheDir: testenv.CacheDir(), RunDir: testenv.RunDir(t)},
		SnapshotsDir: baked.Catalog.Dir(),
		Snapshot:     baked.Snapshot.Name,
		Suites:       slices.DeleteFunc(slices.Clone(Suites), func(s string) bool { return s == "trials" }),
		N:            2, ColdN: 1, K: 2, BudgetMiB: 4096, ForkSizes: []int{1, 2},
		LibvirtURI: "qemu:///system",
		Log:        testenv.Logger(t),
		Progress:   &progress,
	})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"create_pool_p50_ms", "reset_p50_ms", "reset_over_create_ratio", "create_nopool_p50_ms", "create_fullrestore_p50_ms", "coldboot_p50_ms",
		"shot_cached_p50_ms", "shot_changed_png_p50_ms", "shot_jpeg_p50_ms", "screendump_p50_ms",
		"action_http_p50_ms", "action_ws_p50_ms", "action_server_p50_ms", "batch_overhead_p50_ms", "windows_list_p50_ms", "windows_move_p50_ms", "windows_focus_p50_ms",
		"pss_per_desktop_mb_cow", "pss_per_desktop_mb_full", "pss_cow_guest_shared_mb", "pss_cow_anon_mb", "pss_cow_files_mb", "fork1_total_ms", "fork2_total_ms",
		"net_create_none_p50_ms", "net_create_allow_p50_ms", "net_http_direct_p50_ms", "net_http_egress_p50_ms",
		"net_throughput_mb_s", "net_guest_fetch_p50_ms",
		"fleet_create_direct_p50_ms", "fleet_create_proxied_p50_ms", "fleet_get_direct_p50_ms", "fleet_get_proxied_p50_ms", "fleet_get_proxied_tls_p50_ms",
		"fleet_placements_per_s", "fleet_pull_mib_per_s", "fleet_first_create_pulling_ms", "fleet_create_after_pull_ms",
	} {
		v, ok := res.Keys[key]
		if !ok || v == nil || *v <= 0 {
			t.Errorf("%s = %v, want a measured positive number", key, v)
		}
	}
	for _, key := range append([]string{"busy_n1_step_p50_ms", "create_libvirt_p50_ms", "pss_per_desktop_mb_libvirt", "click_type_sync_p50_ms", "type_click_sync_p50_ms", "accessibility_walk_p50_ms", "accessibility_nodes", "devtools_connect_p50_ms", "playwright_connect_p50_ms", "rec_typing_frames_per_s", "create_compare_over_base_ratio", "e2b_create_p50_ms", "e2b_sdk_screenshot_p50_ms", "peers_click_xdotool_p50_ms", "peers_step_ratio",
		"pss_cow_tcg_mb", "pss_cow_guest_dirtied_mb", "create_pool_cold_mirror_p50_ms", "create_pool_phase_first_frame_p50_ms", "create_nopool_phase_spawn_p50_ms"}, browsertoolKeys...) {
		v, ok := res.Keys[key]
		if !ok {
			t.Errorf("%s missing: it must be a number or null with a note", key)
		}
		if v == nil && !noted(res.Notes, key) {
			t.Errorf("%s is null without a note saying why", key)
		}
	}
	// Copy-on-write holds on both drivers: an idle clone costs a fraction
	// of its guest's memory (near all of it means the memory file is not
	// shared).
	guest := float64(baked.Snapshot.Manifest.Machine.MemoryMiB)
	for _, key := range []string{"pss_per_desktop_mb_cow", "pss_per_desktop_mb_libvirt"} {
		if v := res.Keys[key]; v != nil && *v > guest/4 {
			t.Errorf("%s = %.0f MB of a %.0f MiB guest: the memory file is not shared copy-on-write", key, *v, guest)
		}
	}
	var out bytes.Buffer
	if err := WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("--json output is not JSON: %v", err)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !bytes.Contains(html, []byte("<svg")) {
		t.Fatalf("report: %v", err)
	}
	// Nothing left of the run (other packages' tests share the catalog,
	// so its fork templates are checked by the Manager's own tests).
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("left in the state directory: %v", entries)
	}
}

// TestPeersSuite runs the peers suite on the e2b-desktop recipe's snapshot
// (built and baked once, cached by its hash; hostd/app's E2B test shares
// it): every key a number, warmdesk's own calls and the peers' approach
// both measured.
func TestPeersSuite(t *testing.T) {
	baked := testenv.RecipeSnapshot(t, "../../examples/recipes/e2b-desktop.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, Options{
		Paths:        config.Paths{StateDir: testenv.DataDir(t), CacheDir: testenv.CacheDir(), RunDir: testenv.RunDir(t)},
		SnapshotsDir: baked.Catalog.Dir(),
		Snapshot:     baked.Snapshot.Name,
		E2BSnapshot:  baked.Snapshot.Name,
		Suites:       []string{"peers"},
		Log:          testenv.Logger(t),
		Progress:     &progress,
	})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range peersKeys {
		if v := res.Keys["peers_"+k+"_p50_ms"]; v == nil || *v <= 0 {
			t.Errorf("peers_%s_p50_ms = %v, want a measured positive number", k, v)
		}
	}
	for _, k := range peersRatios {
		if v := res.Keys[k]; v == nil || *v <= 0 {
			t.Errorf("%s = %v, want a measured positive ratio", k, v)
		}
	}
}

func noted(notes []string, key string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, key+":") {
			return true
		}
	}
	return false
}
