package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

func TestPercentileNearestRank(t *testing.T) {
	var d Dist
	for _, v := range []int{15, 20, 35, 40, 50} {
		d.Add(time.Duration(v) * time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want int
	}{{5, 15}, {30, 20}, {40, 20}, {50, 35}, {95, 50}, {100, 50}} {
		if got := d.Percentile(tc.p); got != time.Duration(tc.want)*time.Millisecond {
			t.Errorf("p%.0f = %s, want %dms", tc.p, got, tc.want)
		}
	}
	if d.Min() != 15*time.Millisecond || d.Max() != 50*time.Millisecond {
		t.Errorf("min %s max %s", d.Min(), d.Max())
	}
	var empty Dist
	if empty.Percentile(50) != 0 || empty.Min() != 0 {
		t.Error("empty distribution is not zero")
	}
	// Samples are not reordered by asking.
	if d.Samples[0] != 15*time.Millisecond || d.Samples[4] != 50*time.Millisecond {
		t.Error("Percentile sorted the samples in place")
	}
}

func TestParsePSS(t *testing.T) {
	rollup := `55d1c4a00000-7ffc1b7fe000 ---p 00000000 00:00 0                          [rollup]
Rss:              123456 kB
Pss:               48123 kB
Pss_Anon:          20000 kB
Pss_File:          28123 kB
Shared_Clean:      90000 kB
`
	kb, err := parsePSS(strings.NewReader(rollup))
	if err != nil || kb != 48123 {
		t.Fatalf("got %d, %v", kb, err)
	}
	for _, bad := range []string{"Rss: 1 kB\n", "Pss: x kB\n", "Pss: -5 kB\n", ""} {
		if _, err := parsePSS(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParsePSS(f *testing.F) {
	f.Add("Pss: 10 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parsePSS(strings.NewReader(s)); err == nil && v < 0 {
			t.Fatal("negative PSS")
		}
	})
}

const smapsSample = `55d0c0000000-55d0c0400000 r-xp 00000000 08:01 1234 /usr/bin/qemu-system-x86_64
Rss:                4096 kB
Pss:                1024 kB
Anonymous:             0 kB
7f0000000000-7f0040000000 rw-p 00000000 08:01 99 /var/lib/warmdesk/snapshots/s/memory
Size:            1048576 kB
Pss:               40000 kB
Anonymous:         30000 kB
7f1000000000-7f1040000000 rwxp 00000000 00:00 0 
Pss:                9000 kB
Anonymous:          9000 kB
7f2000000000-7f2001000000 rw-p 00000000 00:00 0 
Pss:                5000 kB
Anonymous:          5000 kB
7f3000000000-7f3000021000 rw-p 00000000 00:00 0                          [heap]
Pss:                 700 kB
VmFlags: rd wr mr mw me ac
`

func TestParseSmapsSortsMappings(t *testing.T) {
	p, err := parseSmaps(strings.NewReader(smapsSample), "/var/lib/warmdesk/snapshots/s/memory")
	if err != nil {
		t.Fatal(err)
	}
	want := pssParts{GuestShared: 10000, GuestDirtied: 30000, TCG: 9000, Anon: 5700, Files: 1024}
	if p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	if p.total() != 55724 {
		t.Fatalf("total %d", p.total())
	}
	if _, err := parseSmaps(strings.NewReader(smapsSample), "/elsewhere/memory"); err == nil {
		t.Error("a guest RAM file no mapping names was accepted")
	}
	deleted := strings.Replace(smapsSample, "/s/memory\n", "/s/memory (deleted)\n", 1)
	if p, err := parseSmaps(strings.NewReader(deleted), "/var/lib/warmdesk/snapshots/s/memory"); err != nil || p.GuestDirtied != 30000 {
		t.Errorf("a removed memory file: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "Pss: 5 kB\n", "7f-8f rw-p 0 00:00 0\nPss: x kB\n"} {
		if _, err := parseSmaps(strings.NewReader(bad), ""); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseSmaps(f *testing.F) {
	f.Add(smapsSample, "/var/lib/warmdesk/snapshots/s/memory")
	f.Fuzz(func(t *testing.T, s, guest string) {
		p, err := parseSmaps(strings.NewReader(s), guest)
		if err != nil {
			return
		}
		if p.GuestShared < 0 || p.GuestDirtied < 0 || p.TCG < 0 || p.Anon < 0 || p.Files < 0 {
			t.Fatalf("negative part: %+v", p)
		}
	})
}

func TestPhaseDistsCountAStepOncePerCreate(t *testing.T) {
	var p phaseDists
	p.add([]desktop.PhaseMark{{Name: "spawn", Took: 2}, {Name: "restore", Took: 3}, {Name: "spawn", Took: 5}, {Name: "restore", Took: 7}})
	p.add([]desktop.PhaseMark{{Name: "spawn", Took: 1}, {Name: "first_frame", Took: 4}})
	if got := strings.Join(p.order, ","); got != "spawn,restore,first_frame" {
		t.Fatalf("order %s", got)
	}
	if s := p.dists["spawn"].Samples; len(s) != 2 || s[0] != 7 || s[1] != 1 {
		t.Fatalf("spawn samples %v, want [7 1]", s)
	}
}
