package drive

import (
	"context"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/input"
)

// batchLog collects what the device did for one batch: how long it waited
// on the guest, what it could not confirm, and the screen's change counter
// before the last action's input (the point the trailing screenshot's
// reaction wait starts from). It travels in the batch's context, since
// the device serves whichever batch holds the desktop's queue.
type batchLog struct {
	mu       sync.Mutex
	sync     time.Duration
	warnings []string
	input    bool // an input frame went out
	// counter is the screen's counter before the first input frame of the
	// last action that sent any; bareMove says that action was a move.
	counter  uint64
	bareMove bool
	// next is the kind of the action that started and has sent nothing
	// yet; fresh says there is one.
	next  input.Kind
	fresh bool
}

type batchLogKey struct{}

func withBatchLog(ctx context.Context) (context.Context, *batchLog) {
	l := &batchLog{}
	return context.WithValue(ctx, batchLogKey{}, l), l
}

// batchOf is the batch's log; nil (whose methods do nothing) outside Run.
func batchOf(ctx context.Context) *batchLog {
	l, _ := ctx.Value(batchLogKey{}).(*batchLog)
	return l
}

// starting marks the start of an action.
func (l *batchLog) starting(kind input.Kind) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next, l.fresh = kind, true
}

// sent records an input frame about to go out, with the screen's counter.
func (l *batchLog) sent(counter uint64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fresh || !l.input {
		l.input, l.counter, l.bareMove, l.fresh = true, counter, l.next == input.KindMove, false
	}
}

func (l *batchLog) waited(d time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync += d
}

func (l *batchLog) warn(msg string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.warnings {
		if w == msg {
			return
		}
	}
	l.warnings = append(l.warnings, msg)
}
