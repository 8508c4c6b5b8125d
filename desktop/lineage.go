// Where desktops come from: the snapshots a desktop layers on, the fork
// templates collected when no desktop needs them, and removing a snapshot.

package desktop

import (
	"fmt"
	"slices"
)

// lineage lists a snapshot and every snapshot under it (its disk's parents).
func (m *Manager) lineage(s Snapshot) []string {
	out := []string{s.Name}
	seen := map[string]bool{s.Name: true}
	for p := s.Manifest.Parent; p != "" && !seen[p]; {
		seen[p] = true
		out = append(out, p)
		ps, err := m.catalog.Get(p)
		if err != nil {
			break
		}
		p = ps.Manifest.Parent
	}
	return out
}

// collectSnapshots removes ephemeral snapshots (fork templates) that no
// desktop uses any more.
func (m *Manager) collectSnapshots(candidates []string) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	// A template may only go once the templates layered on it have gone,
	// so repeat until a pass removes nothing.
	for removed := true; removed; {
		removed = false
		for _, name := range candidates {
			if m.collectOne(name) {
				removed = true
			}
		}
	}
}

func (m *Manager) collectOne(name string) bool {
	m.mu.Lock()
	held := m.held[name] > 0
	m.mu.Unlock()
	if held {
		return false
	}
	s, err := m.catalog.Get(name)
	if err != nil || !s.Manifest.Ephemeral {
		return false
	}
	if len(m.UsersOf(name)) > 0 || len(m.childrenOf(name)) > 0 {
		return false
	}
	if w, ok := m.drv.(Warmer); ok {
		w.Warm(s, 0)
	}
	if err := m.catalog.Remove(name); err != nil {
		m.log.Warn("remove fork template", "snapshot", name, "err", err)
		return false
	}
	return true
}

// hold keeps a snapshot from collection while a fork creates its copies.
func (m *Manager) hold(name string) (release func()) {
	m.mu.Lock()
	m.held[name]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.held[name]--; m.held[name] <= 0 {
			delete(m.held, name)
		}
		m.mu.Unlock()
	}
}

// UsersOf lists the desktops that depend on a snapshot.
func (m *Manager) UsersOf(snapshot string) []string {
	var ids []string
	for _, d := range m.List() {
		if d.State != StateDeleted && slices.Contains(d.Uses, snapshot) {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func (m *Manager) childrenOf(snapshot string) []string {
	snaps, _, _ := m.catalog.List()
	var out []string
	for _, s := range snaps {
		if s.Manifest.Parent == snapshot {
			out = append(out, s.Name)
		}
	}
	return out
}

// RemoveSnapshot deletes a snapshot that no desktop and no other snapshot
// uses.
func (m *Manager) RemoveSnapshot(name string) error {
	s, err := m.catalog.Get(name)
	if err != nil {
		return err
	}
	if users := m.UsersOf(name); len(users) > 0 {
		return fmt.Errorf("%w: snapshot %s is used by %d desktops (%s): delete them first", ErrConflict, name, len(users), joinShort(users))
	}
	if kids := m.childrenOf(name); len(kids) > 0 {
		return fmt.Errorf("%w: snapshots %s are layered on %s: remove them first", ErrConflict, joinShort(kids), name)
	}
	if w, ok := m.drv.(Warmer); ok {
		w.Warm(s, 0)
	}
	return m.catalog.Remove(name)
}

func joinShort(ids []string) string {
	if len(ids) > 5 {
		return fmt.Sprintf("%v and %d more", ids[:5], len(ids)-5)
	}
	return fmt.Sprint(ids)
}
