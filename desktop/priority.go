// CPU follows use: a desktop a request used within DrivenFor runs at the
// driven CPU share, the others at their default one (and the QEMU
// driver's warm-pool machines at the least).

package desktop

import "time"

// DrivenFor is how long after its last request ends a desktop keeps the
// driven CPU share (Config.DrivenFor changes it).
const DrivenFor = 5 * time.Second

// Prioritizer is implemented by machines whose share of contended CPU can
// change: one being driven gets more than an idle one.
type Prioritizer interface {
	SetDriven(driven bool) error
}

// usePriority is where a desktop's CPU share stands, guarded by the
// entry's mu.
type usePriority struct {
	// driven is the machine set to the driven share, nil when none is: a
	// reset's new machine starts at the default share.
	driven Machine
	idle   *time.Timer
}

// prioritize gives e's machine the driven share while a request uses it,
// and arms the return to the default share DrivenFor after the last one
// ends. e.mu is held.
func (m *Manager) prioritize(e *entry) {
	p, ok := e.m.(Prioritizer)
	if !ok {
		return
	}
	if e.inUse > 0 {
		if e.prio.idle != nil {
			e.prio.idle.Stop()
		}
		if e.prio.driven != e.m {
			if err := p.SetDriven(true); err != nil {
				m.log.Warn("give a driven desktop its CPU share", "desktop", e.d.ID, "err", err)
			}
			e.prio.driven = e.m
		}
		return
	}
	if e.prio.driven == nil {
		return
	}
	if e.prio.idle == nil {
		e.prio.idle = time.AfterFunc(m.drivenFor, func() { m.unprioritize(e) })
	} else {
		e.prio.idle.Reset(m.drivenFor)
	}
}

// unprioritize returns e's machine to the default share, unless a request
// uses it again or the machine changed.
func (m *Manager) unprioritize(e *entry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inUse > 0 || e.prio.driven != e.m {
		return
	}
	e.prio.driven = nil
	if p, ok := e.m.(Prioritizer); ok {
		if err := p.SetDriven(false); err != nil {
			m.log.Debug("return an idle desktop to its CPU share", "desktop", e.d.ID, "err", err)
		}
	}
}
