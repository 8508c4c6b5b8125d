package e2b

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

// The SDK's getCursorPosition runs `xdotool getmouselocation` in the guest
// right after its moves and clicks, which take the fast path through
// QEMU's tablet. In E2B's sandbox both are xdotool in one X server, so the
// read sees the moves; here the guest reads the tablet's reports on its own
// time, and under load X had not taken a drag's moves when the read came
// (the SDK saw the position from before the drag). So the read waits, up
// to pointerCatchUp, until X's pointer is where hostd last sent it; X's own
// answer is what the SDK then gets, caught up or not.

// pointerCatchUp bounds the wait for X to take the pointer's last move.
const pointerCatchUp = 5 * time.Second

var (
	locationLine = regexp.MustCompile(`^xdotool getmouselocation$`)
	xdotoolXY    = regexp.MustCompile(`x:(\d+)\s+y:(\d+)`)
)

// parseXY reads the position out of xdotool getmouselocation's output.
func parseXY(out string) (input.Point, bool) {
	m := xdotoolXY.FindStringSubmatch(out)
	if m == nil {
		return input.Point{}, false
	}
	x, errx := strconv.Atoi(m[1])
	y, erry := strconv.Atoi(m[2])
	return input.Point{X: x, Y: y}, errx == nil && erry == nil
}

// awaitPointer waits until the guest's X pointer is where the input path
// last put it, reading it with req (the SDK's own command, as its account)
// a little less often each time, within ctx and pointerCatchUp. It returns
// at once when hostd has sent no pointer input to the desktop.
func (s *Server) awaitPointer(ctx context.Context, id string, req drive.ExecRequest) {
	out, err := s.cfg.Guest.Run(ctx, id, drive.Request{Batch: input.Batch{{Kind: input.KindCursorPosition}}})
	if err != nil || out.Err != nil || len(out.Result.Results) != 1 || out.Result.Results[0].Cursor == nil {
		return // no pointer input yet: nothing to wait for
	}
	want := *out.Result.Results[0].Cursor
	ctx, cancel := context.WithTimeout(ctx, pointerCatchUp)
	defer cancel()
	req.Timeout = pointerCatchUp
	wait := 20 * time.Millisecond
	for {
		res, err := s.cfg.Guest.Exec(ctx, id, req)
		if err != nil {
			return
		}
		if got, ok := parseXY(string(res.Stdout)); !ok || got == want {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}
