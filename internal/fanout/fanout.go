// Package fanout passes each published value to every subscriber without
// ever blocking the publisher: a subscriber that falls too far behind loses
// its subscription (its channel closes) and subscribes again.
package fanout

import "sync"

// Buffer bounds how far a subscriber may fall behind.
const Buffer = 256

// Broker fans values out to its subscribers. The zero value is ready.
type Broker[T any] struct {
	mu   sync.Mutex
	subs map[chan T]struct{}
}

// Publish hands v to every subscriber that has room, and drops those that
// have none.
func (b *Broker[T]) Publish(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- v:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// Subscribe returns a channel of values and a function that ends the
// subscription; the channel closes when it ends or falls behind.
func (b *Broker[T]) Subscribe() (<-chan T, func()) {
	ch := make(chan T, Buffer)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[chan T]struct{}{}
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}
