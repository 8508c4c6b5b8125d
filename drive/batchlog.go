package drive

import (
	"context"
	"sync"
	"time"
)

// batchLog collects what the device did for one batch: how long it waited
// on the guest, what it could not confirm, and the screen's change counter
// before the batch's last input frame (the point the trailing screenshot's
// reaction wait starts from). It travels in the batch's context, since
// the device serves whichever batch holds the desktop's queue.
type batchLog struct {
	mu       sync.Mutex
	sync     time.Duration
	warnings []string
	input    bool   // an input frame went out
	counter  uint64 // the screen's counter before the last input frame
	bareMove bool   // the last input frame only moved the pointer
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

func (l *batchLog) sent(counter uint64, bareMove bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.input, l.counter, l.bareMove = true, counter, bareMove
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
