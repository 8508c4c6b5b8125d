package libvirt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.Halter = (*Machine)(nil)

// The disk bound is the QEMU driver's (desktop/qemu/diskbound.go), through
// libvirt's monitor passthrough: QEMU's write threshold on the top
// overlay's file, and its BLOCK_WRITE_THRESHOLD event. libvirt has its
// own block-threshold event (virDomainSetBlockThreshold), but go-libvirt
// does not decode it, so the QMP event is taken from a per-domain QEMU
// monitor subscription held for the domain's life.

// Halted delivers the reason each time the machine paused itself at its
// disk bound.
func (m *Machine) Halted() <-chan string { return m.halted }

// armDiskBound bounds the desktop's own disk (its top overlay's file) at
// disk_mib. The threshold fires once, so it is armed again after every
// resume and on every new top overlay.
func (m *Machine) armDiskBound(ctx context.Context) error {
	rec := m.record()
	if rec.DiskMiB <= 0 || rec.Template {
		return nil
	}
	m.boundMu.Lock()
	if !m.boundWatched {
		// Subscribed before the threshold is set, so no event is missed.
		sub, err := m.monitor().Subscribe(ctx)
		if err != nil {
			m.boundMu.Unlock()
			return fmt.Errorf("disk bound: %w", err)
		}
		m.boundWatched = true
		go m.watchDiskBound(sub)
	}
	m.boundMu.Unlock()
	return m.setDiskThreshold(ctx)
}

// setDiskThreshold sets the threshold on the top overlay's file node.
func (m *Machine) setDiskThreshold(ctx context.Context) error {
	rec := m.record()
	return qemuvm.BoundFile(ctx, m.monitor(), rec.Disk, rec.DiskMiB)
}

// watchDiskBound pauses the domain each time its disk passes the bound,
// until the domain ends. A lost connection to libvirtd ends the
// subscription: once hostd is connected again it subscribes anew and sets
// the threshold again, which catches the next write past the bound even
// if the crossing fell in the gap.
func (m *Machine) watchDiskBound(sub qemuvm.Events) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	// quiet says the watch ends for a reason that needs no word: the
	// domain ended, or the driver closed.
	quiet := func() bool {
		select {
		case <-m.exited:
			return true
		default:
		}
		return ctx.Err() != nil || m.drv.conn.ctx.Err() != nil
	}
	defer func() {
		m.boundMu.Lock()
		m.boundWatched = false // a later arm subscribes again
		m.boundMu.Unlock()
	}()
	for {
		_, err := sub.Wait(ctx, qemuvm.WriteThresholdEvent)
		if ctx.Err() != nil {
			sub.Close()
			return
		}
		if err != nil {
			sub.Close()
			if errors.Is(err, desktop.ErrUnavailable) && !quiet() {
				sub, err = m.resubscribe(ctx)
			}
			if err != nil {
				if !quiet() {
					m.log.Error("disk bound no longer watched", "err", err)
				}
				return
			}
			continue
		}
		m.boundCrossings.Add(1)
		stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
		err = m.Pause(stopCtx)
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

// resubscribe waits for hostd's connection to libvirtd to come back, then
// subscribes to the domain's events and sets the threshold again.
func (m *Machine) resubscribe(ctx context.Context) (qemuvm.Events, error) {
	if _, err := m.drv.conn.get(ctx); err != nil {
		return nil, err
	}
	sub, err := m.monitor().Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.setDiskThreshold(ctx); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}
