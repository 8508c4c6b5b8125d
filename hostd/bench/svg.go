package bench

import (
	"fmt"
	"math"
	"strings"
)

// stripChart draws each sample of each distribution as a dot on a log
// axis, with a tick at its median.
func stripChart(r *Result, keys []string) string {
	const w, rowH, left = 760, 34, 170
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, k := range keys {
		for _, v := range r.Samples[k] {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return "<p>no samples</p>\n"
	}
	lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 0.1))))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	x := func(v float64) float64 {
		return left + (w-left-20)*(math.Log10(math.Max(v, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	h := rowH*len(keys) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	for d := lo; d <= hi; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="10" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(d), x(d), h-25, x(d), h-10, d)
	}
	for i, k := range keys {
		y := 25 + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+4, strings.TrimPrefix(k, "create_"))
		s := r.Samples[k]
		if len(s) == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">not measured</text>`+"\n", left, y+4)
			continue
		}
		for j, v := range s {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#2b6cb0" fill-opacity="0.5"/>`+"\n", x(v), float64(y)+float64(j%5-2)*2)
		}
		if p := r.Keys[k+"_p50_ms"]; p != nil {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c53030" stroke-width="2"/><text x="%.1f" y="%d" fill="#c53030">p50 %.0f</text>`+"\n", x(*p), y-10, x(*p), y+10, x(*p)+4, y-8, *p)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// barChart draws one bar per key, labelled, null keys marked.
func barChart(r *Result, keys []string) string {
	const w, rowH, left = 760, 30, 220
	top := 0.0
	for _, k := range keys {
		if v := r.Keys[k]; v != nil {
			top = math.Max(top, *v)
		}
	}
	if top == 0 {
		return "<p>not measured</p>\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, rowH*len(keys)+10)
	for i, k := range keys {
		y := 5 + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+16, strings.TrimPrefix(k, "pss_per_desktop_mb_"))
		v := r.Keys[k]
		if v == nil {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">not measured</text>`+"\n", left, y+16)
			continue
		}
		bw := (w - left - 80) * *v / top
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="20" fill="#2b6cb0"/><text x="%.1f" y="%d">%.1f MB</text>`+"\n", left, y+2, bw, float64(left)+bw+6, y+16, *v)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
