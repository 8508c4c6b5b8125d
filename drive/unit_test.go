package drive

import (
	"context"
	"errors"
	"fmt"
	"image"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/input"
)

func TestTypingScript(t *testing.T) {
	var s typingSlots
	s.reset([]int{93, 97, 103})
	got := s.script("naïve\r\ncafé 日\t")
	want := typingPrelude +
		"xmodmap -e 'keycode 93 = U00EF U00EF' -e 'keycode 97 = U00E9 U00E9' -e 'keycode 103 = U65E5 U65E5'\n" +
		"xdotool key --clearmodifiers --delay 0 U006E U0061 U00EF U0076 U0065 Return U0063 U0061 U0066 U00E9 U0020 U65E5 Tab\n"
	if got != want {
		t.Errorf("script\n%s\nwant\n%s", got, want)
	}
	// A character seen before keeps its keycode; a new one takes the least
	// recently used keycode.
	got = s.script("éü")
	if !strings.Contains(got, "'keycode 97 = U00E9 U00E9'") || !strings.Contains(got, "'keycode 93 = U00FC U00FC'") {
		t.Errorf("second script %s: want é kept on 97 and ü on 93, the least recently used", got)
	}
}

func TestTypingScriptSegments(t *testing.T) {
	var s typingSlots
	s.reset([]int{93, 97})
	// Four distinct characters on two keycodes: two segments, each binding
	// before it types, none binding a keycode its own segment still needs.
	got := s.script("αβγδ")
	lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(got, typingPrelude)), "\n")
	want := []string{
		"xmodmap -e 'keycode 93 = U03B1 U03B1' -e 'keycode 97 = U03B2 U03B2'",
		"xdotool key --clearmodifiers --delay 0 U03B1 U03B2",
		"xmodmap -e 'keycode 93 = U03B3 U03B3' -e 'keycode 97 = U03B4 U03B4'",
		"xdotool key --clearmodifiers --delay 0 U03B3 U03B4",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("script\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	// Repeats of a character do not count twice.
	got = s.script("ααααβ")
	if strings.Count(got, "xdotool") != 1 {
		t.Errorf("repeated characters split the text: %s", got)
	}
}

func TestTypingScriptOnlyOurWords(t *testing.T) {
	var s typingSlots
	s.reset([]int{93})
	// Shell metacharacters in the text never reach the shell as such.
	got, found := strings.CutPrefix(s.script("'; rm -rf / #$(x)`é"), typingPrelude)
	if !found {
		t.Fatalf("the script does not start with the prelude: %s", got)
	}
	word := regexp.MustCompile(`^(U[0-9A-F]{4,6}|Return|Tab|-e|xmodmap|'keycode|93|=|U[0-9A-F]{4,6}'|xdotool|key|--clearmodifiers|--delay|0)$`)
	for _, w := range strings.Fields(got) {
		if !word.MatchString(w) {
			t.Errorf("script word %q is not one of ours: %s", w, got)
		}
	}
}

func TestParseKeycodes(t *testing.T) {
	codes, err := parseKeycodes("93\n97\n103\n")
	if err != nil || fmt.Sprint(codes) != "[93 97 103]" {
		t.Errorf("%v %v", codes, err)
	}
	for _, bad := range []string{"", "x", "300", "5"} {
		if _, err := parseKeycodes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParsePointer(t *testing.T) {
	p, ok := parsePointer("X=640\nY=401\nSCREEN=0\nWINDOW=123\n")
	if !ok || p != (input.Point{X: 640, Y: 401}) {
		t.Errorf("%v %v", p, ok)
	}
	if _, ok := parsePointer("X=1\n"); ok {
		t.Error("half a position accepted")
	}
}

func TestExecArgv(t *testing.T) {
	path, args := execArgv(ExecRequest{Path: "ls", Args: []string{"-l"}, Timeout: 30 * time.Second})
	if path != "timeout" || strings.Join(args, " ") != "-k 2.000 30.000 ls -l" {
		t.Errorf("%s %q", path, args)
	}
	path, args = execArgv(ExecRequest{Path: "env", Args: []string{"x"}, Env: map[string]string{"B": "2", "A": "1 1"}, Cwd: "/tmp", Timeout: 1500 * time.Millisecond})
	if path != "timeout" || strings.Join(args, "|") != "-k|2.000|1.500|env|-C|/tmp|--|A=1 1|B=2|env|x" {
		t.Errorf("%s %q", path, args)
	}
}

func TestTimedOut(t *testing.T) {
	cases := []struct {
		code int
		took time.Duration
		want bool
	}{{124, 2 * time.Second, true}, {137, 3 * time.Second, true}, {124, time.Second / 2, false}, {0, 5 * time.Second, false}}
	for _, c := range cases {
		if got := timedOut(desktop.ExecResult{ExitCode: c.code, Duration: c.took}, time.Second); got != c.want {
			t.Errorf("exit %d after %s: %v", c.code, c.took, got)
		}
	}
}

func TestFrameKinds(t *testing.T) {
	move, presses, releases := frameKinds([]desktop.InputEvent{{Kind: desktop.InputMove, X: 1, Y: 2}})
	if move == nil || *move != (input.Point{X: 1, Y: 2}) || presses != 0 || releases != 0 {
		t.Errorf("move frame: %v %d %d", move, presses, releases)
	}
	if _, presses, releases := frameKinds([]desktop.InputEvent{{Kind: desktop.InputButton, Button: "wheel-up", Down: true}, {Kind: desktop.InputButton, Button: "wheel-up"}}); presses+releases != 0 {
		t.Error("a wheel notch counted as a press or release that a drag could follow")
	}
	if _, presses, releases := frameKinds([]desktop.InputEvent{{Kind: desktop.InputButton, Button: "left", Down: true}, {Kind: desktop.InputKey, Key: "a", Down: true}}); presses != 1 || releases != 0 {
		t.Errorf("button press: %d presses, %d releases", presses, releases)
	}
	if !releasesOnly([]desktop.InputEvent{{Kind: desktop.InputKey, Key: "shift"}, {Kind: desktop.InputButton, Button: "left"}}) {
		t.Error("releases not recognised")
	}
	if releasesOnly([]desktop.InputEvent{{Kind: desktop.InputKey, Key: "a", Down: true}}) || releasesOnly([]desktop.InputEvent{{Kind: desktop.InputMove}}) {
		t.Error("a press or move passed as a release")
	}
}

func TestGuestFileError(t *testing.T) {
	qga := func(desc string) error {
		return fmt.Errorf("guest agent guest-file-open: guest agent: GenericError: %s", desc)
	}
	cases := []struct {
		err  error
		want error
	}{
		{qga("failed to open file '/nope' (mode: 'r'): No such file or directory"), desktop.ErrNotFound},
		{qga("failed to open file '/etc/hostname/x' (mode: 'r'): Not a directory"), desktop.ErrNotFound},
		{qga("failed to read file: Is a directory"), desktop.ErrInvalid},
		{qga("failed to open file '/proc/x' (mode: 'w'): Permission denied"), desktop.ErrInvalid},
		{fmt.Errorf("%w: no answer", desktop.ErrUnavailable), desktop.ErrUnavailable},
	}
	for _, c := range cases {
		if got := guestFileError("/p", c.err); !errors.Is(got, c.want) {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}

// hangingAgent answers nothing until released, like a guest agent whose
// guest is wedged; it ignores ctx, as a call queued behind another would.
type hangingAgent struct{ release chan struct{} }

func (h hangingAgent) Call(ctx context.Context, cmd string, args, result any) error {
	<-h.release
	return nil
}

type echoAgent struct{}

func (echoAgent) Call(ctx context.Context, cmd string, args, result any) error {
	if p, ok := result.(*any); ok {
		*p = cmd
	}
	if raw, ok := result.(interface{ UnmarshalJSON([]byte) error }); ok {
		return raw.UnmarshalJSON([]byte(`{"pid": 42}`))
	}
	return nil
}

func TestBoundedAgent(t *testing.T) {
	h := hangingAgent{release: make(chan struct{})}
	defer close(h.release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := boundedAgent{h}.Call(ctx, "guest-exec", nil, nil)
	if !errors.Is(err, desktop.ErrUnavailable) || time.Since(start) > time.Second {
		t.Errorf("%v after %s, want unavailable at the deadline", err, time.Since(start))
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := (boundedAgent{echoAgent{}}).Call(context.Background(), "guest-exec", nil, &started); err != nil || started.PID != 42 {
		t.Errorf("answer %+v %v", started, err)
	}
}

func TestFitInside(t *testing.T) {
	cases := []struct{ w, h, mw, mh, ww, wh int }{
		{320, 100, 1280, 800, 1280, 400},
		{100, 100, 1280, 800, 800, 800},
		{2000, 100, 1024, 640, 1024, 51},
		{1, 1000, 1280, 800, 1, 800},
	}
	for _, c := range cases {
		if w, h := fitInside(c.w, c.h, c.mw, c.mh); w != c.ww || h != c.wh {
			t.Errorf("fitInside(%d, %d in %dx%d) = %dx%d, want %dx%d", c.w, c.h, c.mw, c.mh, w, h, c.ww, c.wh)
		}
	}
}

func TestPointerDrawnCountsOnlyASmallRedrawAtThePoint(t *testing.T) {
	at := pointerDrawn(input.Point{X: 100, Y: 100})
	for _, c := range []struct {
		rects []image.Rectangle
		want  bool
	}{
		{[]image.Rectangle{image.Rect(96, 96, 128, 128)}, true},                              // the cursor's tiles
		{[]image.Rectangle{image.Rect(0, 0, 1280, 800)}, false},                              // a repaint around it
		{[]image.Rectangle{image.Rect(600, 600, 632, 632)}, false},                           // a small redraw elsewhere
		{[]image.Rectangle{image.Rect(0, 0, 1280, 800), image.Rect(80, 80, 112, 112)}, true}, // both
		{nil, false},
	} {
		if got := at(c.rects); got != c.want {
			t.Errorf("%v: %v, want %v", c.rects, got, c.want)
		}
	}
}
