package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.VolumeMachine = (*Machine)(nil)

// AttachVolume hot-plugs a volume's disk through libvirt's own device
// attach: libvirt opens the layers (following the backing chain their
// headers name) and labels them for its QEMU user.
func (m *Machine) AttachVolume(ctx context.Context, v desktop.VolumeDisk) error {
	if err := qemuvm.CheckVolumeDisk(v); err != nil {
		return err
	}
	if m.user != nil {
		// QEMU opens a hot-plugged volume's layers by name, as the
		// desktop's id, which must not reach other volumes' layers; the QEMU
		// driver hands it descriptors instead, which libvirt's attach cannot.
		return fmt.Errorf("%w: the libvirt driver hot-plugs volumes only into desktops whose QEMU runs as libvirt's user (hostd --qemu-uids off)", desktop.ErrInvalid)
	}
	if err := qemuvm.CheckSlotFree(m.record().Volumes, v.Slot); err != nil {
		return err
	}
	b, err := xml.Marshal(VolumeDiskXML(v))
	if err != nil {
		return err
	}
	dom := m.domain()
	if err := do(ctx, m.drv.conn, func(l *golibvirt.Libvirt) error {
		return l.DomainAttachDeviceFlags(dom, string(b), uint32(golibvirt.DomainDeviceModifyLive))
	}); err != nil {
		return fmt.Errorf("volume: hot-plug: %w", err)
	}
	m.mu.Lock()
	m.rec.Volumes = append(m.rec.Volumes, v)
	m.mu.Unlock()
	return nil
}

// unplugTimeout bounds the guest's answer to an unplug: its ACPI code
// ejects the device, and libvirt reports it removed.
const unplugTimeout = 20 * time.Second

// DetachVolume unplugs a slot's disk and waits until libvirt reports it
// removed (the detach call itself only asks the guest).
func (m *Machine) DetachVolume(ctx context.Context, slot int) error {
	if _, err := qemuvm.VolumeInSlot(m.record().Volumes, slot); err != nil {
		return err
	}
	dom := m.domain()
	alias := VolumeAlias(slot)
	gone := m.awaitRemoval(alias)
	defer m.forgetRemoval(alias)
	err := do(ctx, m.drv.conn, func(l *golibvirt.Libvirt) error {
		return l.DomainDetachDeviceAlias(dom, alias, uint32(golibvirt.DomainDeviceModifyLive))
	})
	switch {
	case err != nil && strings.Contains(err.Error(), "no device found"):
		// Gone already (a detach a crash cut short).
	case err != nil:
		return fmt.Errorf("volume: unplug: %w", err)
	default:
		wctx, cancel := context.WithTimeout(ctx, unplugTimeout)
		defer cancel()
		select {
		case <-gone:
		case <-wctx.Done():
			return fmt.Errorf("%w: volume: the guest did not release the disk within %s", desktop.ErrUnavailable, unplugTimeout)
		}
	}
	m.mu.Lock()
	m.rec.Volumes = qemuvm.WithoutSlot(m.rec.Volumes, slot)
	m.mu.Unlock()
	return nil
}

// awaitRemoval returns a channel closed when the device of alias goes.
func (m *Machine) awaitRemoval(alias string) <-chan struct{} {
	m.removalMu.Lock()
	defer m.removalMu.Unlock()
	if m.removals == nil {
		m.removals = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	m.removals[alias] = ch
	return ch
}

func (m *Machine) forgetRemoval(alias string) {
	m.removalMu.Lock()
	defer m.removalMu.Unlock()
	delete(m.removals, alias)
}

// deviceRemoved is libvirt's word that a device left the domain.
func (m *Machine) deviceRemoved(alias string) {
	m.removalMu.Lock()
	defer m.removalMu.Unlock()
	if ch, ok := m.removals[alias]; ok {
		close(ch)
		delete(m.removals, alias)
	}
}

// Volumes are the volumes the domain holds now.
func (m *Machine) Volumes() []desktop.VolumeDisk { return slices.Clone(m.record().Volumes) }
