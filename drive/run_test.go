package drive

import (
	"testing"
	"time"
)

func TestReactionStretchesWithPressure(t *testing.T) {
	for _, c := range []struct {
		asked    time.Duration
		pressure float64
		want     time.Duration
	}{
		{DefaultReaction, 0, DefaultReaction},
		{DefaultReaction, 0.5, 2 * time.Second},
		{DefaultReaction, 0.75, 4 * time.Second},
		{DefaultReaction, 0.99, 4 * time.Second},
		{DefaultReaction, 1, 4 * time.Second},
		{DefaultReaction, -0.1, DefaultReaction},
		{2 * time.Second, 0.9, 2 * time.Second}, // chosen by the request
		{0, 0.9, 0},
	} {
		if got := reactionFor(c.asked, c.pressure); got != c.want {
			t.Errorf("reactionFor(%s, %.2f) = %s, want %s", c.asked, c.pressure, got, c.want)
		}
	}
}
