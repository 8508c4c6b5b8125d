package drive

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

// A bound converts in range, and refuses out of range (a count that would
// wrap around as a Duration included) with the field named, as a
// desktop.ErrInvalid, the same way in milliseconds and as a Duration.
func TestBounds(t *testing.T) {
	if d, err := SettleBound.Millis(300); err != nil || d != 300*time.Millisecond {
		t.Fatalf("300 ms: %v %v", d, err)
	}
	for _, ms := range []int64{-1, MaxSettle.Milliseconds() + 1, math.MaxInt64} {
		_, err := SettleBound.Millis(ms)
		var ve *input.ValidationError
		if !errors.As(err, &ve) || ve.Field != "settle_ms" || !errors.Is(err, desktop.ErrInvalid) || !strings.Contains(err.Error(), "0 (capture at once) to 10000") {
			t.Errorf("%d ms: %v", ms, err)
		}
	}
	_, byMillis := ReactionBound.Millis(MaxReaction.Milliseconds() + 1)
	byDuration := ReactionBound.Check(MaxReaction + time.Millisecond)
	if byMillis == nil || byDuration == nil || byMillis.Error() != byDuration.Error() {
		t.Errorf("the two ways disagree: %v / %v", byMillis, byDuration)
	}
	if err := SettleTimeoutBound.Check(MaxSettleTimeout); err != nil {
		t.Errorf("the bound itself: %v", err)
	}
}
