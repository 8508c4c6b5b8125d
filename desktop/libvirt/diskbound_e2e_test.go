package libvirt_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A guest writing until its disk bound pauses itself under libvirt as
// under the QEMU driver, saying disk_full, with its overlay no larger than
// the bound plus a small slack; resumed, it pauses again at its next
// write past the bound.
func TestDiskBoundPausesTheDesktop(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	drv := newDriver(t, testenv.RunDir(t), t.TempDir())
	defer drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const bound = 64
	m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("db-"), Snapshot: baked.Snapshot, DiskMiB: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	rec := parseRecord(t, m.Record())
	before, err := os.Stat(rec.Disk)
	if err != nil {
		t.Fatal(err)
	}
	fill, stopFill := context.WithCancel(ctx)
	defer stopFill()
	go desktop.Shell(fill, m.Agent(), "dd if=/dev/zero of=/root/fill bs=1M count=400 oflag=direct", 3*time.Minute)
	halted := func(when string) {
		t.Helper()
		select {
		case reason := <-m.(desktop.Halter).Halted():
			if !strings.HasPrefix(reason, "disk_full:") {
				t.Fatalf("%s: reason %q, want disk_full", when, reason)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the guest filled its disk and the desktop never paused", when)
		}
		stopped, err := m.(desktop.Stopper).Stopped(ctx)
		if err != nil || !stopped {
			t.Fatalf("%s: guest CPUs stopped: %v, %v; want stopped", when, stopped, err)
		}
	}
	halted("first crossing")
	after, err := os.Stat(rec.Disk)
	if err != nil {
		t.Fatal(err)
	}
	const slackMiB = 16
	t.Logf("overlay %d KiB before the fill, %d KiB when paused: %d KiB past the bound of %d MiB", before.Size()>>10, after.Size()>>10, (after.Size()-bound<<20)>>10, bound)
	if after.Size() > (bound+slackMiB)<<20 {
		t.Fatalf("overlay grew to %d bytes, past the bound of %d MiB plus %d MiB slack", after.Size(), bound, slackMiB)
	}
	if after.Size() < bound<<20 {
		t.Fatalf("paused at %d bytes, before reaching the bound of %d MiB", after.Size(), bound)
	}
	// The dd is still writing: resumed, the guest crosses again at once.
	if err := m.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	halted("after a resume")
	stopFill()
}
