package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"

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
	if slices.ContainsFunc(m.record().Volumes, func(h desktop.VolumeDisk) bool { return h.Slot == v.Slot }) {
		return fmt.Errorf("%w: volume slot %d is taken", desktop.ErrConflict, v.Slot)
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

// DetachVolume unplugs a slot's disk. libvirt waits a few seconds for the
// guest to release it; a disk still in the domain afterwards is reported,
// and stays recorded.
func (m *Machine) DetachVolume(ctx context.Context, slot int) error {
	if !slices.ContainsFunc(m.record().Volumes, func(v desktop.VolumeDisk) bool { return v.Slot == slot }) {
		return fmt.Errorf("%w: volume slot %d holds nothing", desktop.ErrNotFound, slot)
	}
	dom := m.domain()
	alias := VolumeAlias(slot)
	err := do(ctx, m.drv.conn, func(l *golibvirt.Libvirt) error {
		return l.DomainDetachDeviceAlias(dom, alias, uint32(golibvirt.DomainDeviceModifyLive))
	})
	if err != nil && !strings.Contains(err.Error(), "no device found") {
		return fmt.Errorf("volume: unplug: %w", err)
	}
	desc, err := call(ctx, m.drv.conn, func(l *golibvirt.Libvirt) (string, error) { return l.DomainGetXMLDesc(dom, 0) })
	if err != nil {
		return fmt.Errorf("volume: unplug: %w", err)
	}
	if strings.Contains(desc, "'"+alias+"'") || strings.Contains(desc, `"`+alias+`"`) {
		return fmt.Errorf("%w: volume: the guest did not release the disk", desktop.ErrUnavailable)
	}
	m.mu.Lock()
	m.rec.Volumes = slices.DeleteFunc(slices.Clone(m.rec.Volumes), func(v desktop.VolumeDisk) bool { return v.Slot == slot })
	m.mu.Unlock()
	return nil
}
