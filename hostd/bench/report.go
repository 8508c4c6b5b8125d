package bench

import (
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// keyOrder lists the documented keys in display order; docs/BENCHMARKS.md
// describes each.
var keyOrder = []string{
	"create_pool_p50_ms", "create_pool_p95_ms", "create_pool_max_ms",
	"reset_p50_ms", "reset_p95_ms", "reset_max_ms", "reset_create_p50_ms", "reset_create_p95_ms", "reset_create_max_ms", "reset_over_create_ratio",
	"create_nopool_p50_ms", "create_nopool_p95_ms", "create_nopool_max_ms",
	"create_fullrestore_p50_ms", "create_fullrestore_p95_ms", "create_fullrestore_max_ms", "fullrestore_state_mb",
	"create_compare_base_p50_ms", "create_compare_base_p95_ms", "create_compare_base_max_ms",
	"create_compare_p50_ms", "create_compare_p95_ms", "create_compare_max_ms", "create_compare_over_base_ratio",
	"create_libvirt_p50_ms", "create_libvirt_p95_ms", "create_libvirt_max_ms",
	"coldboot_p50_ms", "coldboot_p95_ms", "coldboot_max_ms", "coldboot_over_pool_ratio",
	"shot_cached_p50_ms", "shot_cached_p95_ms", "shot_changed_png_p50_ms", "shot_changed_png_p95_ms",
	"shot_jpeg_p50_ms", "shot_jpeg_p95_ms", "shot_scaled_xga_png_p50_ms", "screendump_p50_ms", "screendump_p95_ms",
	"action_http_p50_ms", "action_http_p95_ms", "action_server_p50_ms", "action_server_p95_ms", "action_ws_p50_ms", "action_ws_p95_ms",
	"batch_total_p50_ms", "batch_guest_render_p50_ms", "batch_overhead_p50_ms", "batch_overhead_p95_ms",
	"rec_idle_cpu_pct", "rec_typing_cpu_pct", "rec_typing_frames_per_s", "rec_encode_cpu_s_per_min",
	"pss_per_desktop_mb_cow", "pss_per_desktop_mb_full", "pss_per_desktop_mb_libvirt",
	"budget_mib", "max_desktops_in_budget_cow", "max_desktops_in_budget_full", "max_desktops_in_budget_libvirt",
	"e2b_create_p50_ms", "e2b_api_create_p50_ms", "e2b_create_sdk_over_api_ratio",
	"e2b_sdk_screenshot_p50_ms", "e2b_sdk_screenshot_guest_p50_ms", "e2b_api_screenshot_p50_ms", "e2b_screenshot_sdk_over_api_ratio", "e2b_screenshot_guest_over_api_ratio",
	"e2b_sdk_left_click_p50_ms", "e2b_sdk_left_click_guest_p50_ms", "e2b_api_click_p50_ms", "e2b_click_sdk_over_api_ratio", "e2b_click_guest_over_api_ratio",
	"peers_click_xdotool_p50_ms", "peers_click_api_p50_ms", "peers_click_ratio",
	"peers_shot_scrot_p50_ms", "peers_shot_api_changed_p50_ms", "peers_shot_api_cached_p50_ms", "peers_shot_changed_ratio", "peers_shot_cached_ratio",
	"peers_step_demo_p50_ms", "peers_step_api_p50_ms", "peers_step_ratio",
	"fork1_total_ms", "fork1_per_copy_ms", "fork3_total_ms", "fork3_per_copy_ms", "fork10_total_ms", "fork10_per_copy_ms",
}

// WriteTable prints the results for a person.
func WriteTable(w io.Writer, r *Result) error {
	m := r.Machine
	fmt.Fprintf(w, "warmdesk bench, %s: accel %s, QEMU %s, %d CPUs, %d MiB; snapshot %s (%s); took %.0f s\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), m.Accel, m.QEMU, m.CPUs, m.MemoryMiB, m.Snapshot, m.Guest, r.Took)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "key\tvalue\t")
	seen := map[string]bool{}
	print := func(k string) {
		v, ok := r.Keys[k]
		if !ok {
			return
		}
		seen[k] = true
		if v == nil {
			fmt.Fprintf(tw, "%s\tnull\t\n", k)
		} else {
			fmt.Fprintf(tw, "%s\t%.2f\t\n", k, *v)
		}
	}
	for _, k := range keyOrder {
		print(k)
	}
	var rest []string
	for k := range r.Keys {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		print(k)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// WriteReport writes DIR/report.html (SVG charts of the create latency
// distributions and memory per desktop) and DIR/results.json.
func WriteReport(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	if err := WriteJSON(f, r); err != nil {
		f.Close()
		return err
	}
	f.Close()
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "<!doctype html><meta charset=utf-8><title>warmdesk bench</title>\n<style>body{font:14px sans-serif;margin:2em;color:#1d2730}h2{font-size:16px}</style>\n")
	fmt.Fprintf(&b, "<h1>warmdesk bench</h1><p>%s &middot; accel %s &middot; QEMU %s &middot; %d CPUs &middot; %d MiB &middot; snapshot %s (%s)</p>\n",
		r.Started.Format("2006-01-02 15:04 UTC"), html.EscapeString(m.Accel), html.EscapeString(m.QEMU), m.CPUs, m.MemoryMiB, html.EscapeString(m.Snapshot), html.EscapeString(m.Guest))
	b.WriteString("<h2>Create latency, to a non-blank first screenshot (ms, log scale; each dot one create)</h2>\n")
	b.WriteString(stripChart(r, []string{"create_pool", "create_nopool", "create_fullrestore", "create_libvirt", "coldboot"}))
	b.WriteString("<h2>Host memory per idle desktop (PSS, MB)</h2>\n")
	b.WriteString(barChart(r, []string{"pss_per_desktop_mb_cow", "pss_per_desktop_mb_full", "pss_per_desktop_mb_libvirt"}))
	return os.WriteFile(filepath.Join(dir, "report.html"), []byte(b.String()), 0o644)
}
