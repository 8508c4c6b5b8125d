package vnc

import (
	"context"
	"sync"
)

// chunkQueue is one viewer's bounded queue of server data not yet written to
// it. Its budget counts the memory of the chunks, including those being
// written, so that a viewer that falls behind costs at most max bytes.
type chunkQueue struct {
	mu     sync.Mutex
	chunks [][]byte
	bytes  int
	max    int
	signal chan struct{} // capacity 1: something was pushed
}

func newChunkQueue(max int) *chunkQueue {
	return &chunkQueue{max: max, signal: make(chan struct{}, 1)}
}

// push adds chunk, or returns false if that would go over the budget.
func (q *chunkQueue) push(chunk []byte) bool {
	q.mu.Lock()
	if q.bytes+cap(chunk) > q.max {
		q.mu.Unlock()
		return false
	}
	q.chunks = append(q.chunks, chunk)
	q.bytes += cap(chunk)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

// popBatch waits for chunks and moves up to about maxBytes of them into dst.
// Their memory stays counted until release.
func (q *chunkQueue) popBatch(ctx context.Context, dst [][]byte, maxBytes int) ([][]byte, error) {
	for {
		q.mu.Lock()
		if len(q.chunks) > 0 {
			n, size := 0, 0
			for n < len(q.chunks) && (n == 0 || size+len(q.chunks[n]) <= maxBytes) {
				size += len(q.chunks[n])
				n++
			}
			dst = append(dst, q.chunks[:n]...)
			clear(q.chunks[:n])
			q.chunks = q.chunks[n:]
			if len(q.chunks) == 0 {
				q.chunks = q.chunks[:0:0] // let the backing array go
			}
			q.mu.Unlock()
			return dst, nil
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return dst, context.Cause(ctx)
		case <-q.signal:
		}
	}
}

// release gives back the budget of written chunks.
func (q *chunkQueue) release(chunks [][]byte) {
	n := 0
	for _, c := range chunks {
		n += cap(c)
	}
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
}
