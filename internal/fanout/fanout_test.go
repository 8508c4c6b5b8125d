package fanout

import "testing"

func TestEverySubscriberHearsEachValueInOrder(t *testing.T) {
	var b Broker[int]
	one, stopOne := b.Subscribe()
	two, stopTwo := b.Subscribe()
	defer stopTwo()
	b.Publish(1)
	b.Publish(2)
	for _, ch := range []<-chan int{one, two} {
		if a, c := <-ch, <-ch; a != 1 || c != 2 {
			t.Fatalf("got %d, %d; want 1, 2", a, c)
		}
	}
	stopOne()
	stopOne() // a second stop is harmless
	if _, open := <-one; open {
		t.Fatal("a stopped subscription's channel is still open")
	}
	b.Publish(3)
	if v := <-two; v != 3 {
		t.Fatalf("after another stopped, got %d; want 3", v)
	}
}

func TestASubscriberThatFallsBehindIsDroppedNotWaitedFor(t *testing.T) {
	var b Broker[int]
	slow, stop := b.Subscribe()
	defer stop()
	for i := range Buffer + 1 {
		b.Publish(i) // would block here if the broker waited
	}
	n := 0
	for range slow {
		n++
	}
	if n != Buffer {
		t.Fatalf("the slow subscriber got %d values before its channel closed; want %d", n, Buffer)
	}
}
