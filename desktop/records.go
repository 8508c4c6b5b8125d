// Settings kept in a desktop's record: who controls it, its network policy,
// its expiry.

package desktop

import (
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/netpolicy"
)

// SetControl passes control of a desktop's input to an agent or a person.
func (m *Manager) SetControl(id string, holder Controller, by string) (Desktop, error) {
	if holder != ControlAgent && holder != ControlPerson {
		return Desktop{}, fmt.Errorf("%w: control holder %q: use agent or person", ErrInvalid, holder)
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	if holder == ControlAgent {
		by = ""
	}
	changed := e.d.Control.Holder != holder || e.d.Control.By != by
	if changed {
		e.d.Control = Control{Holder: holder, By: by, Since: m.now().UTC()}
	}
	d := e.d
	e.mu.Unlock()
	if changed {
		if err := m.store.PutDesktop(d); err != nil {
			return Desktop{}, fmt.Errorf("record control: %w", err)
		}
		m.publish(EventControl, d)
	}
	return d, nil
}

// SetNetwork replaces a desktop's egress policy. It applies to the guest's
// next connection; a stopped or hibernated desktop keeps it for its wake.
func (m *Manager) SetNetwork(id string, p netpolicy.Policy) (Desktop, error) {
	if err := CheckNetwork(p); err != nil {
		return Desktop{}, err
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	e.d.Network = p.Normalized()
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return Desktop{}, fmt.Errorf("record network policy: %w", err)
	}
	m.publish(EventNetwork, d)
	return d, nil
}

// SetExpiry sets when a desktop is deleted; the zero time means never.
// A time ahead becomes its TTL (later uses move the end by as much), a
// time already past deletes it at the TTL sweeper's next turn.
func (m *Manager) SetExpiry(id string, at time.Time) (Desktop, error) {
	ttl := at.Sub(m.now())
	if !at.IsZero() && ttl > m.capacity.limits.MaxTTL {
		return Desktop{}, fmt.Errorf("%w: expiry %s from now: at most %s", ErrInvalid, ttl.Round(time.Second), m.capacity.limits.MaxTTL)
	}
	e, err := m.lookup(id)
	if err != nil {
		return Desktop{}, err
	}
	e.mu.Lock()
	if e.d.State == StateStopping || e.d.State == StateDeleted {
		e.mu.Unlock()
		return Desktop{}, fmt.Errorf("%w: desktop %s is being deleted", ErrConflict, id)
	}
	if at.IsZero() {
		e.d.ExpiresAt, e.d.TTL = nil, 0
	} else {
		at = at.UTC()
		e.d.ExpiresAt, e.d.TTL, e.savedExpiry = &at, max(ttl, 0), at
	}
	d := e.d
	e.mu.Unlock()
	if err := m.store.PutDesktop(d); err != nil {
		return Desktop{}, fmt.Errorf("record expiry: %w", err)
	}
	// No event: the state did not change (a desktop.state event would
	// read as one in a recording's action log).
	m.kickTTL()
	return d, nil
}

// CheckNetwork checks an egress policy; the error is ErrInvalid and names
// the entry at fault.
func CheckNetwork(p netpolicy.Policy) error {
	if _, err := netpolicy.Compile(p, nil); err != nil {
		return fmt.Errorf("%w: network.%w", ErrInvalid, err)
	}
	return nil
}
