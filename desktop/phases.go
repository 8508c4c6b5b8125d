package desktop

import (
	"context"
	"sync"
	"time"
)

// Phases records when the steps of one operation end, so the bench can say
// where a create's time goes. A context carries it (WithPhases); the code on
// the path marks the end of each step with MarkPhase, which does nothing
// when the context carries none.
type Phases struct {
	mu    sync.Mutex
	last  time.Time
	marks []PhaseMark
}

// PhaseMark is one step: its name and how long it took since the previous
// mark (or since the Phases began).
type PhaseMark struct {
	Name string
	Took time.Duration
}

// NewPhases starts a record now.
func NewPhases() *Phases { return &Phases{last: time.Now()} }

type phasesKey struct{}

// WithPhases returns a context whose operations mark their steps in p.
func WithPhases(ctx context.Context, p *Phases) context.Context {
	return context.WithValue(ctx, phasesKey{}, p)
}

// carryPhases gives to, a context of the Manager's own, the record from's
// caller asked for.
func carryPhases(to, from context.Context) context.Context {
	if p, ok := from.Value(phasesKey{}).(*Phases); ok {
		return WithPhases(to, p)
	}
	return to
}

// MarkPhase ends the step name of the operation ctx belongs to.
func MarkPhase(ctx context.Context, name string) {
	if p, ok := ctx.Value(phasesKey{}).(*Phases); ok {
		p.Mark(name)
	}
}

// Mark ends the step name now.
func (p *Phases) Mark(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.marks = append(p.marks, PhaseMark{Name: name, Took: now.Sub(p.last)})
	p.last = now
}

// Marks are the steps so far, in order.
func (p *Phases) Marks() []PhaseMark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PhaseMark(nil), p.marks...)
}
