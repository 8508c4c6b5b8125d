package qemu

import (
	"context"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.Halter = (*Machine)(nil)

// Halted delivers the reason each time the machine paused itself at its
// disk bound.
func (m *Machine) Halted() <-chan string { return m.halted }

// armDiskBound bounds the desktop's own disk (its top overlay's file) at
// disk_mib: QEMU reports the first write past it, and the machine then
// stops its guest and says so on Halted. The threshold fires once, so it
// is armed again after every resume and on every new top overlay.
func (m *Machine) armDiskBound(ctx context.Context) error {
	rec := m.record()
	if rec.DiskMiB <= 0 || rec.Template {
		return nil
	}
	m.boundOnce.Do(func() {
		// Subscribed before the threshold is set, so no event is missed.
		sub := m.qmp.Subscribe()
		go m.watchDiskBound(sub)
	})
	return qemuvm.BoundFile(ctx, m.qmp, rec.Disk, rec.DiskMiB)
}

// watchDiskBound stops the guest each time its disk passes the bound.
func (m *Machine) watchDiskBound(sub *qmp.Subscription) {
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.proc.done
		cancel()
	}()
	for {
		if _, err := sub.Wait(ctx, qemuvm.WriteThresholdEvent, nil); err != nil {
			return
		}
		stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
		err := m.qmp.Execute(stopCtx, "stop", nil, nil)
		stopCancel()
		if err != nil {
			m.log.Error("could not pause a desktop past its disk bound", "err", err)
			continue
		}
		select {
		case m.halted <- qemuvm.DiskFullReason(m.record().DiskMiB):
		default: // one reason waiting is enough
		}
	}
}
