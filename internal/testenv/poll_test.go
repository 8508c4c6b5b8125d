package testenv

import (
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	calls := 0
	if !Poll(10*time.Second, time.Millisecond, 4*time.Millisecond, func() bool { calls++; return calls == 3 }) {
		t.Fatal("Poll gave up on a condition that came true on the third call")
	}
	if calls != 3 {
		t.Fatalf("done called %d times, want 3", calls)
	}
	calls = 0
	start := time.Now()
	if Poll(20*time.Millisecond, time.Millisecond, 5*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if time.Since(start) < 20*time.Millisecond || calls < 2 {
		t.Fatalf("Poll stopped after %s and %d calls, before its deadline", time.Since(start), calls)
	}
}
