package libvirt_test

import (
	"context"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A guest writing until its disk bound pauses itself under libvirt as
// under the QEMU driver, saying disk_full, with its overlay no larger than
// the bound plus a small slack; resumed, it pauses again at its next
// write past the bound.
func TestDiskBoundPausesTheDesktop(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
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
	stopFill := desktoptest.FillPastDiskBound(ctx, t, m, rec.Disk, bound)
	defer stopFill()
	// The dd is still writing: resumed, the guest crosses again at once.
	if err := m.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	desktoptest.AwaitDiskFull(ctx, t, m, "after a resume")
}
