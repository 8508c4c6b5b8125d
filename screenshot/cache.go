package screenshot

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// cacheKey identifies a picture: the framebuffer content (its change
// counter), every option that shapes the output, and the cursor shape.
type cacheKey struct {
	counter uint64
	opts    Options
	cursor  uint64
}

// cacheEntry is a capture in progress, or done and kept.
type cacheEntry struct {
	key  cacheKey
	done chan struct{} // closed when shot and err are set
	shot Shot
	err  error
	elem *list.Element // in the LRU list once done and kept
}

// CacheStats counts what a Capturer's cache did.
type CacheStats struct {
	Hits      uint64 // served a kept picture
	Shared    uint64 // waited for another caller's identical capture
	Encodes   uint64 // captured and encoded
	Evictions uint64 // dropped kept pictures
	Entries   int    // pictures kept now
	Bytes     int    // their encoded size
}

var errCapturePanicked = errors.New("capture panicked")

// shotCache keeps encoded pictures per key, bounded in count and bytes, and
// makes concurrent identical captures share one encode.
type shotCache struct {
	maxEntries int
	maxBytes   int

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry // in progress and kept
	lru     list.List                // kept entries, most recently used first
	bytes   int
	newest  uint64 // highest counter kept
	stats   CacheStats
}

func newShotCache(maxEntries, maxBytes int) *shotCache {
	return &shotCache{maxEntries: maxEntries, maxBytes: maxBytes, entries: make(map[cacheKey]*cacheEntry)}
}

// do returns the picture for key: a kept one, the result of an identical
// capture in progress, or a new one from capture. capture may return a
// picture of a later counter than key's (the screen moved on meanwhile); it
// is kept under the counter it shows.
func (c *shotCache) do(ctx context.Context, key cacheKey, capture func() (Shot, error)) (Shot, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
			c.stats.Hits++
			shot := e.shot
			c.mu.Unlock()
			shot.Cached = true
			return shot, nil
		}
		c.stats.Shared++
		c.mu.Unlock()
		select {
		case <-e.done:
			if e.err != nil {
				return Shot{}, e.err
			}
			shot := e.shot
			shot.Cached = true
			return shot, nil
		case <-ctx.Done():
			return Shot{}, fmt.Errorf("wait for an identical capture: %w", ctx.Err())
		}
	}
	e := &cacheEntry{key: key, done: make(chan struct{})}
	c.entries[key] = e
	c.stats.Encodes++
	c.mu.Unlock()

	var shot Shot
	err := errCapturePanicked // what waiters see if capture panics
	defer func() { c.finish(e, shot, err) }()
	shot, err = capture()
	return shot, err
}

// finish publishes an in-progress entry's result and keeps a good one.
func (c *shotCache) finish(e *cacheEntry, shot Shot, err error) {
	c.mu.Lock()
	defer close(e.done)
	defer c.mu.Unlock()
	e.shot, e.err = shot, err
	delete(c.entries, e.key)
	if err != nil {
		return
	}
	key := e.key
	key.counter = shot.Counter
	if _, ok := c.entries[key]; ok {
		return // kept or in progress already under the counter it shows
	}
	if shot.Counter < c.newest {
		return // the screen has moved on; nobody asks for this again
	}
	kept := &cacheEntry{key: key, done: e.done, shot: shot}
	kept.elem = c.lru.PushFront(kept)
	c.entries[key] = kept
	c.bytes += len(shot.Data)
	if shot.Counter > c.newest {
		c.newest = shot.Counter
		// Callers ask for the screen as it is now: pictures of older
		// counters are dead weight.
		for el := c.lru.Front(); el != nil; {
			next := el.Next()
			if old := el.Value.(*cacheEntry); old.key.counter < c.newest {
				c.remove(old)
			}
			el = next
		}
	}
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.Back().Value.(*cacheEntry))
	}
}

func (c *shotCache) remove(e *cacheEntry) {
	c.lru.Remove(e.elem)
	delete(c.entries, e.key)
	c.bytes -= len(e.shot.Data)
	c.stats.Evictions++
}

func (c *shotCache) snapshot() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes = c.lru.Len(), c.bytes
	return s
}
