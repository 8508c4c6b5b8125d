package libvirt_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/hostd/settle"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// phases collects the driver's "restored" debug records.
type phases struct {
	mu   sync.Mutex
	recs map[string][]time.Duration
}

func (p *phases) Enabled(context.Context, slog.Level) bool { return true }
func (p *phases) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *phases) WithGroup(string) slog.Handler            { return p }
func (p *phases) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "restored" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if d, ok := a.Value.Any().(time.Duration); ok {
			p.recs[a.Key] = append(p.recs[a.Key], d)
		}
		return true
	})
	return nil
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// pssKB reads a process's proportional set size.
func pssKB(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "Pss:" {
			v, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no Pss in smaps_rollup of %d", pid)
	return 0
}

// measure times n restores (to a non-blank screen) and then keeps k idle
// desktops to read their PSS.
func measure(t *testing.T, drv desktop.Driver, snap desktop.Snapshot, n, k int) (creates []time.Duration, pssMB float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for range n {
		start := time.Now()
		m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("ms-"), Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		img, err := m.Screendump(ctx)
		took := time.Since(start)
		m.Destroy(context.WithoutCancel(ctx))
		if err != nil || desktop.BlankScreen(img) {
			t.Fatalf("restored screen: blank or %v", err)
		}
		creates = append(creates, took)
	}
	var ms []desktop.Machine
	defer func() {
		for _, m := range ms {
			m.Destroy(context.WithoutCancel(ctx))
		}
	}()
	for range k {
		m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("ps-"), Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		if _, err := settle.Machine(ctx, m, 2*time.Second, 2*time.Minute, testenv.Logger(t)); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, m := range ms {
		if m.Pid() == 0 {
			t.Fatal("no pid for PSS")
		}
		total += pssKB(t, m.Pid())
	}
	return creates, float64(total) / float64(k) / 1024
}

// TestMeasureLibvirtBesideQEMU logs the libvirt driver's create latency
// (restore to a first non-blank screendump, no warm pool), its phases
// (DomainCreateXML, the QMP restore) and the PSS of idle desktops, beside
// the QEMU driver's without its warm pool, on the same snapshot and host.
// The bounds only catch a broken copy-on-write (PSS near the guest's whole
// memory) or a stuck create; the numbers are in the log.
func TestMeasureLibvirtBesideQEMU(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	const n, k = 8, 4
	ph := &phases{recs: map[string][]time.Duration{}}
	testenv.UsesLibvirtd(t)
	lv, err := libvirt.New(context.Background(), libvirt.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: slog.New(ph)})
	if err != nil {
		newDriver(t, testenv.RunDir(t), testenv.DataDir(t)) // skips or fails with the reason
		t.Fatal(err)
	}
	defer lv.Close()
	lvCreates, lvPSS := measure(t, lv, baked.Snapshot, n, k)

	qd, err := qemu.New(context.Background(), qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer qd.Close()
	qCreates, qPSS := measure(t, qd, baked.Snapshot, n, k)

	t.Logf("libvirt create p50 %s (max %s): DomainCreateXML p50 %s, QMP restore+resume p50 %s, overlay p50 %s; PSS %.1f MB per idle desktop (%d desktops)",
		p50(lvCreates).Round(time.Millisecond), slices.Max(lvCreates).Round(time.Millisecond),
		p50(ph.recs["create_domain"]).Round(time.Millisecond), p50(ph.recs["restore"]).Round(time.Millisecond), p50(ph.recs["overlay"]).Round(time.Millisecond), lvPSS, k)
	t.Logf("qemu (no pool) create p50 %s (max %s); PSS %.1f MB per idle desktop; libvirt/qemu create ratio %.1f",
		p50(qCreates).Round(time.Millisecond), slices.Max(qCreates).Round(time.Millisecond), qPSS, float64(p50(lvCreates))/float64(p50(qCreates)))
	mem := float64(baked.Snapshot.Manifest.Machine.MemoryMiB)
	if lvPSS > mem/4 {
		t.Errorf("libvirt desktops take %.0f MB PSS each of a %.0f MiB guest: the memory file is not shared copy-on-write", lvPSS, mem)
	}
	if p := p50(lvCreates); p > 10*time.Second {
		t.Errorf("libvirt create p50 %s", p)
	}
}
