package drive

import (
	"context"
	"sync"
)

// fifo is a lock whose waiters get it in arrival order and can give up when
// their context ends. sync.Mutex promises neither.
type fifo struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{}
}

// lock waits for the lock in arrival order until ctx ends.
func (q *fifo) lock(ctx context.Context) error {
	q.mu.Lock()
	if !q.held {
		q.held = true
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.mu.Unlock()

	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		for i, w := range q.waiters {
			if w == turn {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				q.mu.Unlock()
				return ctx.Err()
			}
		}
		q.mu.Unlock()
		// The lock was handed to us as ctx ended: pass it on.
		q.unlock()
		return ctx.Err()
	}
}

// unlock hands the lock to the longest waiter, or frees it.
func (q *fifo) unlock() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.held = false
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}
