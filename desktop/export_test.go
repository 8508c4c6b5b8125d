package desktop

import "time"

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
