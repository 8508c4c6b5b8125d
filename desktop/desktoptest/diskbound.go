package desktoptest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// DiskBoundSlackMiB is how far past its bound a desktop's disk may have
// grown when it pauses: the writes in flight when QEMU reported the
// crossing.
const DiskBoundSlackMiB = 16

// FillPastDiskBound has a guest write zeros well past its disk bound
// (boundMiB, the machine's disk_mib) and checks, for any driver, that the
// machine pauses itself saying disk_full with its overlay (disk, on the
// host) between the bound and the bound plus DiskBoundSlackMiB. The guest
// goes on writing until stop is called, so a resume crosses again.
func FillPastDiskBound(ctx context.Context, t *testing.T, m desktop.Machine, disk string, boundMiB int) (stop func()) {
	t.Helper()
	before, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	fill, stopFill := context.WithCancel(ctx)
	go desktop.Shell(fill, m.Agent(), "dd if=/dev/zero of=/root/fill bs=1M count=400 oflag=direct", 3*time.Minute)
	AwaitDiskFull(ctx, t, m, "the first crossing")
	after, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(boundMiB) << 20
	t.Logf("overlay %d KiB before the fill, %d KiB when paused: %d KiB past the bound of %d MiB", before.Size()>>10, after.Size()>>10, (after.Size()-bound)>>10, boundMiB)
	if after.Size() > bound+DiskBoundSlackMiB<<20 {
		t.Fatalf("overlay grew to %d bytes, past the bound of %d MiB plus %d MiB slack", after.Size(), boundMiB, DiskBoundSlackMiB)
	}
	if after.Size() < bound {
		t.Fatalf("paused at %d bytes, before reaching the bound of %d MiB", after.Size(), boundMiB)
	}
	return stopFill
}

// AwaitDiskFull waits for a machine to say it paused itself at its disk
// bound, and checks that its CPUs are stopped.
func AwaitDiskFull(ctx context.Context, t *testing.T, m desktop.Machine, when string) {
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
