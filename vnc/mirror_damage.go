package vnc

import "image"

// damageLog remembers the rectangles of the last updates, so that a caller
// holding an older frame can redraw only what changed since.

const (
	damageHistory     = 64  // updates remembered
	maxRectsPerUpdate = 32  // beyond this an update is kept as its bounding box
	maxDamageRects    = 256 // beyond this Damage returns one bounding box
)

type damageEntry struct {
	counter uint64
	rects   []image.Rectangle
	resized bool
}

type damageLog struct {
	ring [damageHistory]damageEntry
	n    int // entries held
	next int // slot for the next entry
}

func (l *damageLog) add(counter uint64, rects []image.Rectangle, resized bool) {
	e := &l.ring[l.next]
	e.counter, e.resized = counter, resized
	if len(rects) > maxRectsPerUpdate {
		e.rects = append(e.rects[:0], unionOf(rects))
	} else {
		e.rects = append(e.rects[:0], rects...)
	}
	l.next = (l.next + 1) % damageHistory
	l.n = min(l.n+1, damageHistory)
}

// since collects the rectangles of the updates after counter since up to
// current; counters of consecutive updates differ by one.
func (l *damageLog) since(since, current uint64) ([]image.Rectangle, bool) {
	if since == current {
		return nil, true
	}
	if since > current || current-since > uint64(l.n) {
		return nil, false
	}
	need := int(current - since)
	var out []image.Rectangle
	for i := need - 1; i >= 0; i-- { // oldest first
		e := &l.ring[(l.next-1-i+2*damageHistory)%damageHistory]
		if e.resized {
			return nil, false
		}
		out = append(out, e.rects...)
	}
	if len(out) > maxDamageRects {
		out = []image.Rectangle{unionOf(out)}
	}
	return out, true
}
