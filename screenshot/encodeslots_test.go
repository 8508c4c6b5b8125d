package screenshot

import (
	"context"
	"image"
	"sync"
	"testing"
	"time"
)

// blockingSource holds every Frame call until release closes, saying on
// entered when one begins.
type blockingSource struct {
	entered chan<- struct{}
	release <-chan struct{}
	counter uint64
}

func (b *blockingSource) Frame(dst *image.RGBA) (*image.RGBA, uint64) {
	b.entered <- struct{}{}
	<-b.release
	return image.NewRGBA(image.Rect(0, 0, 8, 8)), b.counter
}
func (b *blockingSource) Changed() (uint64, <-chan struct{}) { return b.counter, make(chan struct{}) }
func (b *blockingSource) Poke()                              {}
func (b *blockingSource) Cursor() (*image.RGBA, image.Point, bool) {
	return nil, image.Point{}, false
}

// No more encodes run at once than there are slots (as set by
// LimitEncodes, the flag), however many desktops ask; the others wait
// their turn and then succeed.
func TestEncodesAreBounded(t *testing.T) {
	const slots = 3
	LimitEncodes(slots)
	defer LimitEncodes(0)
	entered, release := make(chan struct{}, 64), make(chan struct{})
	n := slots + 3
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		c := NewCapturer(&blockingSource{entered: entered, release: release, counter: uint64(i)}, CaptureConfig{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Capture(context.Background(), Options{})
			errs <- err
		}()
	}
	deadline := time.After(10 * time.Second)
	for range slots {
		select {
		case <-entered:
		case <-deadline:
			t.Fatal("the first encodes did not start")
		}
	}
	if held := len(*encodeSlots.Load()); held != slots {
		t.Fatalf("%d encodes hold slots, want all %d", held, slots)
	}
	select {
	case <-entered:
		t.Fatalf("encode %d started while %d held every slot", slots+1, slots)
	default:
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
