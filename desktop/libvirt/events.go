package libvirt

import (
	"context"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// connected runs on every new connection to libvirtd, before any call may
// use it: it subscribes to the domain events the machines need (lifecycle,
// guest agent) and then settles what happened while hostd was not
// listening, so no domain's end can go unnoticed across a reconnection.
//
// The subscriptions take a context that is never cancelled: go-libvirt
// deregisters a subscription when its context ends, and at Close those
// deregistrations raced the connection's close. libvirtd 9.0 then freed
// the callbacks twice ("could not find event callback ... for deletion",
// remoteClientFreePrivateCallbacks) and segfaulted, taking every desktop's
// libvirtd down (seen in CI at the end of this package's tests). A closed
// connection drops its callbacks on libvirtd's side in one place, and the
// streams end on ours once the socket is gone.
func (d *Driver) connected(ctx context.Context, l *golibvirt.Libvirt) error {
	ctx = context.WithoutCancel(ctx)
	life, err := l.LifecycleEvents(ctx)
	if err != nil {
		return fmt.Errorf("subscribe to lifecycle events: %w", err)
	}
	go func() {
		for ev := range life {
			d.lifecycle(ev)
		}
	}()
	agents, err := l.SubscribeEvents(ctx, golibvirt.DomainEventIDAgentLifecycle, golibvirt.OptDomain{})
	if err != nil {
		return fmt.Errorf("subscribe to guest agent events: %w", err)
	}
	go func() {
		for ev := range agents {
			if e, ok := ev.(*golibvirt.DomainEventCallbackAgentLifecycleMsg); ok {
				if m := d.machine(e.Dom.UUID); m != nil {
					m.agent.set(agentState(e.State))
				}
			}
		}
	}()
	removed, err := l.SubscribeEvents(ctx, golibvirt.DomainEventIDDeviceRemoved, golibvirt.OptDomain{})
	if err != nil {
		return fmt.Errorf("subscribe to device removal events: %w", err)
	}
	go func() {
		for ev := range removed {
			if e, ok := ev.(*golibvirt.DomainEventCallbackDeviceRemovedMsg); ok {
				if m := d.machine(e.Msg.Dom.UUID); m != nil {
					m.deviceRemoved(e.Msg.DevAlias)
				}
			}
		}
	}()
	d.reconcile(l)
	return nil
}

// lifecycle hands a domain's lifecycle event to its machine.
func (d *Driver) lifecycle(ev golibvirt.DomainEventLifecycleMsg) {
	m := d.machine(ev.Dom.UUID)
	if m == nil {
		return // not one of ours, or one that already ended
	}
	m.lifeEvent()
	switch golibvirt.DomainEventType(ev.Event) {
	case golibvirt.DomainEventStopped:
		m.exit(stopReason(ev.Detail))
	case golibvirt.DomainEventCrashed:
		m.log.Warn("guest crashed", "detail", ev.Detail)
	}
}

// stopReason words a stopped event's detail for ExitReason.
func stopReason(detail int32) string {
	switch golibvirt.DomainEventStoppedDetailType(detail) {
	case golibvirt.DomainEventStoppedShutdown:
		return "was shut down (the guest powered off)"
	case golibvirt.DomainEventStoppedDestroyed:
		return "was destroyed through libvirt"
	case golibvirt.DomainEventStoppedCrashed:
		return "ended: the guest crashed"
	case golibvirt.DomainEventStoppedMigrated:
		return "was migrated away by libvirt"
	case golibvirt.DomainEventStoppedSaved:
		return "was saved by libvirt"
	case golibvirt.DomainEventStoppedFailed:
		return "ended unexpectedly (libvirt: the QEMU process failed or was killed)"
	case golibvirt.DomainEventStoppedFromSnapshot:
		return "was reverted to a snapshot by libvirt"
	}
	return fmt.Sprintf("ended (libvirt stop detail %d)", detail)
}

// reconcile checks, after a (re)connection, that every machine's domain
// still runs: one that ended while hostd was away gets no event.
func (d *Driver) reconcile(l *golibvirt.Libvirt) {
	d.mu.Lock()
	ms := make([]*Machine, 0, len(d.machines))
	for _, m := range d.machines {
		ms = append(ms, m)
	}
	d.mu.Unlock()
	for _, m := range ms {
		dom := m.domain()
		if dom.Name == "" {
			continue // still being created; its create call reports
		}
		st, _, err := l.DomainGetState(dom, 0)
		switch {
		case libvirtCode(err) == golibvirt.ErrNoDomain:
			m.exit("ended while hostd was not connected to libvirtd")
		case err != nil:
			m.log.Warn("domain state after reconnecting", "err", err)
		case golibvirt.DomainState(st) == golibvirt.DomainShutoff || golibvirt.DomainState(st) == golibvirt.DomainCrashed:
			m.exit("was " + stateName(st) + " while hostd was not connected to libvirtd")
		default:
			m.agent.set(agentUnknown) // libvirtd's agent connection is new too
		}
	}
}
