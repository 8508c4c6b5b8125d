// Where desktops come from: the snapshots a desktop layers on, the fork
// templates collected when no desktop needs them, and removing a snapshot.

package desktop

import (
	"fmt"
	"slices"
	"sync"
)

// Lineage is where desktops come from and go back to: the snapshot
// catalog, snapshots of desktops, forks, resets, the collection of fork
// templates no desktop needs any more, and the warm pools.
type Lineage struct {
	m *Manager
	// gcMu serialises the removal of unused fork templates, so two desktops
	// deleted at once cannot each see the other as a user and both skip it.
	gcMu sync.Mutex
	// held are the snapshots forks in flight hold, guarded by m.mu.
	held  map[string]int
	pools pools
}

// Catalog is the snapshot catalog.
func (l *Lineage) Catalog() *Catalog { return l.m.catalog }

// PoolSize is how many machines the warm pool of a snapshot holds ready;
// pooled says whether the driver keeps warm pools at all.
func (l *Lineage) PoolSize(name string) (n int, pooled bool) {
	if l.pools.w == nil {
		return 0, false
	}
	return l.pools.w.PoolSize(name), true
}

// Shape is the machine this host restores into: a snapshot restores here
// only if its own shape matches it (the restore key).
func (l *Lineage) Shape() MachineShape { return l.m.drv.Shape() }

// chain lists a snapshot and every snapshot under it (its disk's parents).
func (l *Lineage) chain(s Snapshot) []string {
	out := []string{s.Name}
	seen := map[string]bool{s.Name: true}
	for p := s.Manifest.Parent; p != "" && !seen[p]; {
		seen[p] = true
		out = append(out, p)
		ps, err := l.m.catalog.Get(p)
		if err != nil {
			break
		}
		p = ps.Manifest.Parent
	}
	return out
}

// collect removes ephemeral snapshots (fork templates) that no desktop
// uses any more.
func (l *Lineage) collect(candidates []string) {
	l.gcMu.Lock()
	defer l.gcMu.Unlock()
	// A template may only go once the templates layered on it have gone,
	// so repeat until a pass removes nothing.
	for removed := true; removed; {
		removed = false
		for _, name := range candidates {
			if l.collectOne(name) {
				removed = true
			}
		}
	}
}

func (l *Lineage) collectOne(name string) bool {
	m := l.m
	m.mu.Lock()
	held := l.held[name] > 0
	m.mu.Unlock()
	if held {
		return false
	}
	s, err := m.catalog.Get(name)
	if err != nil || !s.Manifest.Ephemeral {
		return false
	}
	if len(l.UsersOf(name)) > 0 || len(l.childrenOf(name)) > 0 {
		return false
	}
	l.pools.stop(s)
	if err := m.catalog.Remove(name); err != nil {
		m.log.Warn("remove fork template", "snapshot", name, "err", err)
		return false
	}
	return true
}

// hold keeps a snapshot from collection while a fork creates its copies.
func (l *Lineage) hold(name string) (release func()) {
	m := l.m
	m.mu.Lock()
	l.held[name]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if l.held[name]--; l.held[name] <= 0 {
			delete(l.held, name)
		}
		m.mu.Unlock()
	}
}

// UsersOf lists the desktops that depend on a snapshot.
func (l *Lineage) UsersOf(snapshot string) []string {
	var ids []string
	for _, d := range l.m.List() {
		if d.State != StateDeleted && slices.Contains(d.Uses, snapshot) {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func (l *Lineage) childrenOf(snapshot string) []string {
	snaps, _, _ := l.m.catalog.List()
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
func (l *Lineage) RemoveSnapshot(name string) error {
	s, err := l.m.catalog.Get(name)
	if err != nil {
		return err
	}
	if users := l.UsersOf(name); len(users) > 0 {
		return fmt.Errorf("%w: snapshot %s is used by %d desktops (%s): delete them first", ErrConflict, name, len(users), joinShort(users))
	}
	if kids := l.childrenOf(name); len(kids) > 0 {
		return fmt.Errorf("%w: snapshots %s are layered on %s: remove them first", ErrConflict, joinShort(kids), name)
	}
	l.pools.stop(s)
	return l.m.catalog.Remove(name)
}

func joinShort(ids []string) string {
	if len(ids) > 5 {
		return fmt.Sprintf("%v and %d more", ids[:5], len(ids)-5)
	}
	return fmt.Sprint(ids)
}

// recover finishes what a crash left of the lineage once the desktops are
// back: drafts go, fork templates whose desktops are all gone are
// collected, and the pools start following the catalog.
func (l *Lineage) recover() {
	m := l.m
	if err := m.catalog.CleanDrafts(); err != nil {
		m.log.Warn("clean snapshot drafts", "err", err)
	}
	// Fork templates whose desktops are all gone.
	if snaps, _, err := m.catalog.List(); err == nil {
		var names []string
		for _, s := range snaps {
			names = append(names, s.Name)
		}
		l.collect(names)
	}
	// Watch first, so a bake that ends between the two is not missed.
	l.pools.watch()
	l.pools.sync()
}

// usesOf is d's snapshots in use: those its record lists, and any snapshot
// made from d that the record does not list yet.
func (l *Lineage) usesOf(d Desktop) []string {
	uses := append([]string(nil), d.Uses...)
	snaps, _, err := l.m.catalog.List()
	if err != nil {
		return uses
	}
	for _, s := range snaps {
		if s.Manifest.Source == d.ID && !slices.Contains(uses, s.Name) {
			uses = append(uses, s.Name)
		}
	}
	return uses
}
