package drive_test

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/input"
)

// The service's tests run it on the fake driver, with an in-memory guest
// agent and screen: no HTTP, no QEMU.

type harness struct {
	t      *testing.T
	mgr    *desktop.Manager
	svc    *drive.Service
	guest  *drivetest.Guest
	screen *drivetest.Screen
	id     string
	f      *drivetest.Desktop
}

func newHarness(t *testing.T, cfg drive.Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	cfg.Manager, cfg.Screens = f.Manager, f.Screens
	if cfg.KeystrokeInterval == 0 {
		cfg.KeystrokeInterval = time.Microsecond
	}
	if cfg.KeyReaction == 0 {
		cfg.KeyReaction = 20 * time.Millisecond // a click on the fake screen draws nothing to react with
	}
	return &harness{t: t, mgr: f.Manager, svc: drive.New(ctx, cfg), guest: f.Guest, screen: f.Screen, id: f.ID, f: f}
}

func (h *harness) machine() *desktoptest.FakeMachine { return h.f.Machine(h.t) }

func (h *harness) run(b input.Batch) (drive.Outcome, error) {
	req := drive.NewRequest(b)
	req.Settle = 0
	return h.svc.Run(context.Background(), h.id, req)
}

func at(x, y int) *input.Point { return &input.Point{X: x, Y: y} }

func TestRunSendsAClickToTheMachine(t *testing.T) {
	h := newHarness(t, drive.Config{})
	out, err := h.run(input.Batch{{Kind: input.KindClick, At: at(10, 20)}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	frames := h.machine().Inputs()
	want := []desktop.InputEvent{
		{Kind: desktop.InputMove, X: 10, Y: 20},
		{Kind: desktop.InputButton, Button: "left", Down: true},
		{Kind: desktop.InputButton, Button: "left"},
	}
	if len(frames) != len(want) {
		t.Fatalf("frames %v, want %v", frames, want)
	}
	for i, f := range frames {
		if len(f) != 1 || f[0] != want[i] {
			t.Errorf("frame %d = %v, want %v", i, f, want[i])
		}
	}
	if p, ok := h.svc.Pointer(h.id); !ok || p != (input.Point{X: 10, Y: 20}) {
		t.Errorf("pointer = %v %v", p, ok)
	}
}

func TestRunRefusesAnInvalidBatchWhole(t *testing.T) {
	h := newHarness(t, drive.Config{})
	_, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}, {Kind: input.KindMove, At: at(5000, 1)}})
	var ve *input.ValidationError
	if !errors.As(err, &ve) || ve.Field != "actions[1].x" {
		t.Fatalf("err = %v, want a validation error on actions[1].x", err)
	}
	if n := len(h.machine().Inputs()); n != 0 {
		t.Errorf("%d frames sent for a batch that failed validation", n)
	}
}

// blockGuestTyping makes typing through the guest (text the US layout
// cannot type) wait until the returned function is called, and reports
// each wait's start on started.
func blockGuestTyping(h *harness) (started <-chan struct{}, release func()) {
	gate := make(chan struct{})
	st := make(chan struct{}, 4)
	h.guest.Typing = func(ctx context.Context, text string) error {
		st <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil
	}
	var once sync.Once
	return st, func() { once.Do(func() { close(gate) }) }
}

func TestBatchesQueueInArrivalOrder(t *testing.T) {
	h := newHarness(t, drive.Config{})
	started, release := blockGuestTyping(h)
	defer release()
	first := make(chan error, 1)
	go func() {
		_, err := h.run(input.Batch{{Kind: input.KindType, Text: "café"}, {Kind: input.KindMove, At: at(1, 1)}})
		first <- err
	}()
	<-started // the first batch holds the desktop's queue now
	second := make(chan drive.Outcome, 1)
	go func() {
		out, _ := h.run(input.Batch{{Kind: input.KindMove, At: at(2, 2)}})
		second <- out
	}()
	select {
	case <-second:
		t.Fatal("the second batch ran while the first was still running")
	case <-time.After(50 * time.Millisecond):
		// Bounded look for a wrong early answer; the order is checked below.
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	out := <-second
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	frames := h.machine().Inputs()
	if len(frames) != 2 || frames[0][0].X != 1 || frames[1][0].X != 2 {
		t.Errorf("frames %v: want the first batch's move, then the second's", frames)
	}
	if out.Result.Queued <= 0 {
		t.Errorf("the second batch reports no time queued")
	}
}

func TestAPersonTakingControlStopsTheAgent(t *testing.T) {
	h := newHarness(t, drive.Config{})
	started, release := blockGuestTyping(h)
	defer release()
	done := make(chan drive.Outcome, 1)
	go func() {
		out, _ := h.run(input.Batch{{Kind: input.KindType, Text: "café"}, {Kind: input.KindClick, At: at(5, 5)}})
		done <- out
	}()
	<-started
	if _, err := h.mgr.SetControl(h.id, desktop.ControlPerson, "ada"); err != nil {
		t.Fatal(err)
	}
	release()
	out := <-done
	if !errors.Is(out.Err, desktop.ErrControlled) {
		t.Fatalf("batch error = %v, want ErrControlled", out.Err)
	}
	if got := out.Result.Results[1].Status; got != input.StatusError {
		t.Errorf("the click after the handover: %s", got)
	}
	for _, f := range h.machine().Inputs() {
		for _, e := range f {
			if e.Down || e.Kind == desktop.InputMove {
				t.Errorf("input reached the machine after a person took control: %v", f)
			}
		}
	}
	// A new batch is refused before anything is sent.
	if _, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}}); !errors.Is(err, desktop.ErrControlled) {
		t.Errorf("batch while a person is in control: %v", err)
	}
	// Handed back, the agent drives again.
	if _, err := h.mgr.SetControl(h.id, desktop.ControlAgent, ""); err != nil {
		t.Fatal(err)
	}
	if out, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}}); err != nil || out.Err != nil {
		t.Errorf("batch after handing back: %v %v", err, out.Err)
	}
}

func TestRunRefusesAPausedDesktop(t *testing.T) {
	h := newHarness(t, drive.Config{})
	if _, err := h.mgr.Pause(context.Background(), h.id); err != nil {
		t.Fatal(err)
	}
	_, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}})
	var te *desktop.TransitionError
	if !errors.As(err, &te) || te.From != desktop.StatePaused {
		t.Errorf("err = %v, want a transition error from paused", err)
	}
}

func TestDragWaitsForThePressThenPacesItsMoves(t *testing.T) {
	const step = 20 * time.Millisecond
	h := newHarness(t, drive.Config{DragStep: step, PressTimeout: 5 * time.Second, DragHold: time.Millisecond})
	m := h.machine()
	path := []input.Point{{X: 100, Y: 100}, {X: 200, Y: 100}, {X: 300, Y: 100}}
	out, err := h.run(input.Batch{{Kind: input.KindDrag, Path: path}})
	if err != nil || out.Err != nil {
		t.Fatalf("drag: %v / %v", err, out.Err)
	}
	var kinds []string
	for _, f := range m.Inputs() {
		e := f[0]
		switch e.Kind {
		case desktop.InputMove:
			kinds = append(kinds, "move")
		case desktop.InputButton:
			kinds = append(kinds, map[bool]string{true: "press", false: "release"}[e.Down])
		}
	}
	// The nudge after the press (sealPress) comes before the first move.
	want := "move press move move move release"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("frames: %s, want %s", got, want)
	}
	if nudge := m.Inputs()[2][0]; nudge.X != 101 || nudge.Y != 100 {
		t.Errorf("the press was sealed with a move to %d,%d, want 101,100", nudge.X, nudge.Y)
	}
	// The second move waits a step after the first, and the release a
	// step after the last move.
	if out.Result.Elapsed < 2*step {
		t.Errorf("drag took %s, less than its pacing of 2 x %s", out.Result.Elapsed, step)
	}
}

func TestDeletedDesktopIsForgotten(t *testing.T) {
	h := newHarness(t, drive.Config{})
	if _, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Delete(context.Background(), h.id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(input.Batch{{Kind: input.KindMove, At: at(1, 1)}}); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("batch on a deleted desktop: %v", err)
	}
}

func TestTextOutsideTheUSLayoutIsTypedThroughTheGuest(t *testing.T) {
	h := newHarness(t, drive.Config{})
	out, err := h.run(input.Batch{{Kind: input.KindType, Text: "naïve 日本\n"}, {Kind: input.KindType, Text: "ok"}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if got := h.guest.Typed(); len(got) != 1 || got[0] != "naïve 日本\n" {
		t.Errorf("typed through the guest: %q", got)
	}
	// "ok" is US text: key frames through QEMU, press and release each.
	if n := len(h.machine().Inputs()); n != 2 {
		t.Errorf("%d key frames for two US letters, want 2", n)
	}
}

// A click into a text field shows only its caret, no larger than the
// pointer: once the pointer is back and drawn, that small change lets the
// keys go, without waiting out the reaction bound.
func TestKeysAfterAClickGoWhenTheCaretShows(t *testing.T) {
	h := newHarness(t, drive.Config{KeyWait: 5 * time.Second, KeyReaction: 30 * time.Second})
	done := make(chan struct{})
	defer close(done)
	go func() {
		// A caret blinking every 200 ms once the pointer is back home
		// (move, press, release, the nudge, home).
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if len(h.machine().Inputs()) >= 5 {
				h.screen.Draw(image.Rect(300, 300, 302, 320))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := drive.NewRequest(input.Batch{{Kind: input.KindClick, At: at(10, 20)}, {Kind: input.KindKey, Chord: "a"}})
	req.Settle = 0
	out, err := h.svc.Run(ctx, h.id, req)
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v (the keys waited for the reaction bound, not the caret)", err, out.Err)
	}
	want := "move 10,20, press, release, move 11,20, move 10,20, key a"
	if got := kinds(h.machine().Inputs()); got != want {
		t.Errorf("frames: %s\nwant:   %s", got, want)
	}
}

// After a reaction larger than the pointer, keys wait for the guest to be
// done with the click, and say so when it stays busy.
func TestKeysAfterAClickWaitForABusyGuest(t *testing.T) {
	h := newHarness(t, drive.Config{KeyWait: 5 * time.Second})
	h.machine().SetBusy(true)
	// The page reacts to the click with a large repaint (a focus ring).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if len(h.machine().Inputs()) >= 3 { // move, press, release
				h.screen.Draw(image.Rect(200, 200, 600, 400))
				return
			}
		}
	}()
	out, err := h.run(input.Batch{{Kind: input.KindClick, At: at(10, 20)}, {Kind: input.KindKey, Chord: "a"}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "still busy") {
		t.Errorf("warnings %q, want one saying the desktop was still busy", out.Warnings)
	}
	if out.SyncWait < 100*time.Millisecond {
		t.Errorf("sync wait %s: the keys did not wait a whole window for the busy guest", out.SyncWait)
	}
	if got := kinds(h.machine().Inputs()); !strings.HasSuffix(got, "key a") {
		t.Errorf("frames: %s, want the key last", got)
	}
}

func TestCursorPositionAsksTheGuestWhenUnknown(t *testing.T) {
	h := newHarness(t, drive.Config{})
	h.guest.SetPointer(640, 400)
	req := drive.NewRequest(input.Batch{{Kind: input.KindCursorPosition}})
	req.Display = image.Pt(640, 400) // half the native size
	out, err := h.svc.Run(context.Background(), h.id, req)
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if c := out.Result.Results[0].Cursor; c == nil || *c != (input.Point{X: 320, Y: 200}) {
		t.Errorf("cursor %v, want 320,200 in the declared display", c)
	}
}

// kinds names a machine's frames: move X,Y, press, release, key.
func kinds(frames [][]desktop.InputEvent) string {
	var out []string
	for _, f := range frames {
		switch e := f[0]; e.Kind {
		case desktop.InputMove:
			out = append(out, fmt.Sprintf("move %d,%d", e.X, e.Y))
		case desktop.InputButton:
			out = append(out, map[bool]string{true: "press", false: "release"}[e.Down])
		case desktop.InputKey:
			out = append(out, "key "+e.Key)
		}
	}
	return strings.Join(out, ", ")
}

func TestKeysAfterAClickWaitForTheGuestToTakeIt(t *testing.T) {
	h := newHarness(t, drive.Config{KeyWait: 5 * time.Second})
	out, err := h.run(input.Batch{{Kind: input.KindClick, At: at(10, 20)}, {Kind: input.KindKey, Chord: "a"}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	// The nudge after the click, seen drawn, then the pointer back, then the key.
	want := "move 10,20, press, release, move 11,20, move 10,20, key a"
	if got := kinds(h.machine().Inputs()); got != want {
		t.Errorf("frames: %s\nwant:   %s", got, want)
	}
	if out.SyncWait <= 0 || len(out.Warnings) != 0 {
		t.Errorf("sync wait %s, warnings %q", out.SyncWait, out.Warnings)
	}
	// Across batches too, and for text typed through the guest.
	if _, err := h.run(input.Batch{{Kind: input.KindClick, At: at(30, 40)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(input.Batch{{Kind: input.KindType, Text: "é"}}); err != nil {
		t.Fatal(err)
	}
	want += ", move 30,40, press, release, move 31,40, move 30,40"
	if got := kinds(h.machine().Inputs()); got != want {
		t.Errorf("frames: %s\nwant:   %s", got, want)
	}
	if got := h.guest.Typed(); len(got) != 1 {
		t.Errorf("typed %q", got)
	}
	// Keys with no click before them go at once.
	before := len(h.machine().Inputs())
	if _, err := h.run(input.Batch{{Kind: input.KindKey, Chord: "b"}}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(h.machine().Inputs()[before:]); got != "key b" {
		t.Errorf("frames: %s, want only the key", got)
	}
}

func TestKeysAfterAnUnseenClickGoOnWithAWarning(t *testing.T) {
	h := newHarness(t, drive.Config{KeyWait: 20 * time.Millisecond})
	h.screen.Src.OnPoke(nil) // a guest that draws no pointer
	out, err := h.run(input.Batch{{Kind: input.KindClick, At: at(10, 20)}, {Kind: input.KindKey, Chord: "a"}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "without the guest being seen to take the click") {
		t.Errorf("warnings %q", out.Warnings)
	}
	if got := kinds(h.machine().Inputs()); !strings.HasSuffix(got, "key a") {
		t.Errorf("frames: %s: the key was not sent", got)
	}
}

func TestTheTrailingScreenshotWaitsForAReaction(t *testing.T) {
	h := newHarness(t, drive.Config{})
	req := drive.NewRequest(input.Batch{{Kind: input.KindClick, At: at(10, 20)}})
	req.Screenshot, req.Settle = true, 10*time.Millisecond
	out, err := h.svc.Run(context.Background(), h.id, req)
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if p := out.Picture; p == nil || p.Reacted == nil || *p.Reacted || p.ReactionWait >= time.Second {
		t.Fatalf("a click that only moved the pointer: %s", reactionOf(p))
	}
	// Typing draws text: a reaction.
	req.Batch = input.Batch{{Kind: input.KindKey, Chord: "a"}}
	out, err = h.svc.Run(context.Background(), h.id, req)
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if p := out.Picture; p == nil || p.Reacted == nil || !*p.Reacted {
		t.Fatalf("a key that drew text: %s", reactionOf(p))
	}
	// A screen that does not react: the wait ends at its bound and says so.
	h.screen.Src.OnPoke(nil)
	req.Reaction = 30 * time.Millisecond
	req.Batch = input.Batch{{Kind: input.KindClick, At: at(10, 20)}}
	out, err = h.svc.Run(context.Background(), h.id, req)
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if p := out.Picture; p == nil || p.Reacted == nil || *p.Reacted || p.ReactionWait < req.Reaction {
		t.Fatalf("a screen that never changed: %s, want no reaction after %s", reactionOf(p), req.Reaction)
	}
	// No input, no reaction wait.
	req.Batch = input.Batch{{Kind: input.KindScreenshot}}
	out, _ = h.svc.Run(context.Background(), h.id, req)
	if p := out.Picture; p == nil || p.Reacted != nil {
		t.Fatalf("a batch without input: %s, want no reaction wait", reactionOf(p))
	}
}

func reactionOf(p *drive.Picture) string {
	switch {
	case p == nil:
		return "no picture"
	case p.Reacted == nil:
		return "no reaction wait"
	}
	return fmt.Sprintf("reacted %v after %s", *p.Reacted, p.ReactionWait)
}

// A click after typed keys waits for the guest to have taken them: its
// CPUs going idle. While they stay busy the press is held back.
func TestAClickAfterKeysWaitsForTheGuestToTakeThem(t *testing.T) {
	h := newHarness(t, drive.Config{KeyReaction: 10 * time.Second})
	m := h.machine()
	m.SetBusy(true)
	const busyFor = 300 * time.Millisecond
	heldBack := make(chan string, 1)
	go func() {
		for !strings.Contains(kinds(m.Inputs()), "key b") {
			time.Sleep(time.Millisecond)
		}
		<-time.After(busyFor) // the guest still at work on the keys
		heldBack <- kinds(m.Inputs())
		m.SetBusy(false)
	}()
	out, err := h.run(input.Batch{{Kind: input.KindKey, Chord: "a"}, {Kind: input.KindKey, Chord: "b"}, {Kind: input.KindClick, At: at(10, 20)}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if got := <-heldBack; strings.Contains(got, "press") {
		t.Errorf("frames while the guest was busy with the keys: %s; the press went before it was idle", got)
	}
	if want := "key a, key b, move 10,20, press, release"; kinds(m.Inputs()) != want {
		t.Errorf("frames: %s\nwant:   %s", kinds(m.Inputs()), want)
	}
	if len(out.Warnings) != 0 || out.SyncWait < busyFor {
		t.Errorf("warnings %q, sync wait %s: want none, and at least the %s the guest was busy", out.Warnings, out.SyncWait, busyFor)
	}
	// Once taken, the next click does not wait again.
	before := len(m.Inputs())
	out, err = h.run(input.Batch{{Kind: input.KindClick, At: at(30, 40)}})
	if err != nil || out.Err != nil || out.SyncWait != 0 {
		t.Fatalf("second click: %v / %v, sync wait %s", err, out.Err, out.SyncWait)
	}
	if got := kinds(m.Inputs()[before:]); got != "move 30,40, press, release" {
		t.Errorf("frames: %s", got)
	}
}

func TestAClickAfterKeysToABusyGuestGoesOnWithAWarning(t *testing.T) {
	h := newHarness(t, drive.Config{KeyReaction: 250 * time.Millisecond})
	h.machine().SetBusy(true)
	out, err := h.run(input.Batch{{Kind: input.KindKey, Chord: "a"}, {Kind: input.KindClick, At: at(10, 20)}})
	if err != nil || out.Err != nil {
		t.Fatalf("run: %v / %v", err, out.Err)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "followed keys while the desktop was still busy") {
		t.Errorf("warnings %q", out.Warnings)
	}
	if got := kinds(h.machine().Inputs()); got != "key a, move 10,20, press, release" {
		t.Errorf("frames: %s", got)
	}
	// Keys whose bound has passed by the time the click comes (an
	// agent's next call) cost the click nothing.
	if _, err := h.run(input.Batch{{Kind: input.KindKey, Chord: "b"}}); err != nil {
		t.Fatal(err)
	}
	<-time.After(300 * time.Millisecond) // the agent's turn, longer than the bound
	out, err = h.run(input.Batch{{Kind: input.KindClick, At: at(10, 20)}})
	if err != nil || out.Err != nil || out.SyncWait != 0 || len(out.Warnings) != 0 {
		t.Errorf("a click a turn after the keys: %v / %v, sync wait %s, warnings %q; want no wait", err, out.Err, out.SyncWait, out.Warnings)
	}
}

// A drag whose end the guest has not acted on is held while its CPUs stay
// busy, and released once the screen shows the window following.
func TestADragIsHeldWhileTheGuestIsBusy(t *testing.T) {
	h := newHarness(t, drive.Config{DragHold: time.Millisecond, DragBusyHold: 30 * time.Second})
	m := h.machine()
	m.SetBusy(true)
	const busyFor = 300 * time.Millisecond
	heldBack := make(chan string, 1)
	go func() {
		for strings.Count(kinds(m.Inputs()), "move") < 4 { // the nudge and three moves
			time.Sleep(time.Millisecond)
		}
		<-time.After(busyFor) // the window manager still catching up
		heldBack <- kinds(m.Inputs())
		h.screen.Draw(image.Rect(100, 100, 700, 500)) // the window moves
	}()
	path := []input.Point{{X: 100, Y: 100}, {X: 200, Y: 100}, {X: 300, Y: 100}}
	out, err := h.run(input.Batch{{Kind: input.KindDrag, Path: path}})
	if err != nil || out.Err != nil {
		t.Fatalf("drag: %v / %v", err, out.Err)
	}
	if got := <-heldBack; strings.Contains(got, "release") {
		t.Errorf("frames while the guest was busy: %s; the release went before the window moved", got)
	}
	if len(out.Warnings) != 0 {
		t.Errorf("warnings %q", out.Warnings)
	}
}

func TestADragOnABusyGuestEndsAtItsBoundWithAWarning(t *testing.T) {
	h := newHarness(t, drive.Config{DragHold: time.Millisecond, DragBusyHold: 300 * time.Millisecond})
	h.machine().SetBusy(true)
	path := []input.Point{{X: 100, Y: 100}, {X: 300, Y: 100}}
	out, err := h.run(input.Batch{{Kind: input.KindDrag, Path: path}})
	if err != nil || out.Err != nil {
		t.Fatalf("drag: %v / %v", err, out.Err)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "drag ended while the desktop was still busy") {
		t.Errorf("warnings %q", out.Warnings)
	}
	if out.Result.Elapsed < 300*time.Millisecond {
		t.Errorf("drag took %s, less than its busy hold", out.Result.Elapsed)
	}
	if got := kinds(h.machine().Inputs()); !strings.HasSuffix(got, "release") {
		t.Errorf("frames: %s: the drag was not released", got)
	}
}
