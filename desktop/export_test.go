package desktop

import (
	"context"
	"time"
)

// ExpireNowForTest moves a desktop's expiry to now and wakes the TTL loop.
func ExpireNowForTest(m *Manager, id string) {
	e, err := m.lookup(id)
	if err != nil {
		return
	}
	e.mu.Lock()
	now := time.Now().Add(-time.Millisecond)
	e.d.ExpiresAt = &now
	e.mu.Unlock()
	m.kickTTL()
}

// InFlightForTest is what capacity holds for creates in flight.
func InFlightForTest(m *Manager) (pending, reservedMiB int) {
	m.capacity.mu.Lock()
	defer m.capacity.mu.Unlock()
	return m.capacity.pending, m.capacity.reservedMiB
}

// ExpireDueForTest runs one turn of the TTL sweeper.
func ExpireDueForTest(m *Manager) { m.expireDue(context.Background()) }

// AgeSavedExpiryForTest makes the sweeper believe a desktop's record holds
// an end by ago earlier than it does.
func AgeSavedExpiryForTest(m *Manager, id string, ago time.Duration) {
	if e, err := m.lookup(id); err == nil {
		e.mu.Lock()
		e.savedExpiry = e.savedExpiry.Add(-ago)
		e.mu.Unlock()
	}
}
