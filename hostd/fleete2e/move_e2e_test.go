package fleete2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/cli"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// Running desktops move between hosts: one whose guest counts every
// 100 ms moves from h2 to h3 (which pulls its snapshot first) while a
// viewer watches and an agent types, and goes on where it was; a move
// whose target is killed mid-stream leaves the desktop on its source; a
// move whose source is killed right after the switch leaves it on its
// target; and hostd fleet drain --move empties h2, which is then killed
// without ending any desktop.
func TestRunningDesktopsMoveBetweenHosts(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	hosts, _, _, _, _ := formFleet(t, 41, 51, 2*time.Second, func(h *host) {
		switch h.name {
		case "h1":
			// h1 dies as a move's target, in the stream.
			h.args = append(h.args, "--max-desktops", "3")
			h.env = []string{desktop.FaultEnv + "=" + desktop.FaultMoveReceiving}
		case "h2":
			// Only h2 holds the snapshot: creates land there.
			h.args = append(h.args, "--max-desktops", "3")
			h.hold(baked.Snapshot)
		case "h3":
			// h3 dies as a move's source, right after the switch. It
			// takes one desktop: the creates after it pulled the snapshot
			// still land on h2.
			h.args = append(h.args, "--max-desktops", "1")
			h.env = []string{desktop.FaultEnv + "=" + desktop.FaultMoveSwitched}
		}
	})
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]
	for _, h := range hosts {
		listsAll(ctx, t, h, 3)
	}
	var ids []string
	for range 3 {
		d, err := h2.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
		if err != nil || d.Host != "h2" {
			h2.fail("create: %+v, %v; want it on h2", d, err)
		}
		ids = append(ids, d.ID)
	}

	// The guest counts, holds a file, and shows a shell the agent types
	// into; a viewer's token is issued on h2.
	d1 := ids[0]
	shell(ctx, t, h2, d1, `nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 &`)
	if _, err := h2.c.WriteFile(ctx, d1, "/tmp/before-move", strings.NewReader("written on h2\n")); err != nil {
		h2.fail("write a file: %v", err)
	}
	var tok api.IssuedToken
	if err := h2.c.Do(ctx, http.MethodPost, "/v1/desktops/"+d1+"/tokens", api.IssueToken{Role: "view"}, &tok); err != nil {
		h2.fail("issue a viewer's token: %v", err)
	}
	viewerSeesFrame(ctx, t, h1, d1, tok.Token)
	// A viewer watches through h1 while the desktop moves: its socket
	// ends at the switch (the viewer page connects again by itself).
	watching := openViewer(ctx, t, h1, d1, tok.Token)
	defer watching.Close()
	cut := make(chan error, 1)
	go func() {
		for {
			if _, _, err := watching.ReadMessage(); err != nil {
				cut <- err
				return
			}
		}
	}()
	before := counter(ctx, t, h2, d1)

	// The move, through h1, while an agent types through h1.
	var typed sync.WaitGroup
	typed.Add(1)
	var typeErr error
	go func() {
		defer typed.Done()
		_, typeErr = h1.c.Actions(ctx, d1, api.ActionsRequest{Actions: input.Batch{{Kind: input.KindType, Text: "echo typed >> /tmp/typed\n"}}})
	}()
	m, err := h1.c.MoveDesktop(ctx, d1, "h3")
	if err != nil {
		h2.fail("move %s to h3: %v", d1, err)
	}
	typed.Wait()
	if typeErr != nil {
		t.Fatalf("typing during the move: %v", typeErr)
	}
	t.Logf("move to h3: %+v", m)
	if m.Desktop.Host != "h3" || m.From != "h2" || m.To != "h3" || m.StateBytes == 0 || m.HeldMs <= 0 {
		t.Fatalf("the move answered %+v; want the desktop on h3, from h2", m)
	}
	if got := hostOf(ctx, t, h1, d1); got != "h3 running" {
		t.Fatalf("after the move h1 lists the desktop %q, want h3 running", got)
	}
	select {
	case err := <-cut:
		t.Logf("the viewer's socket open during the move ended at the switch: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the viewer's socket to the source stayed open 30 s after the move")
	}
	after := counter(ctx, t, h1, d1)
	if after < before {
		t.Fatalf("the guest's counter went from %d to %d: the guest started again", before, after)
	}
	waitCounterPast(ctx, t, h1, d1, after)
	if got := readFile(ctx, t, h3, d1, "/tmp/before-move"); got != "written on h2\n" {
		t.Fatalf("the file written before the move reads %q", got)
	}
	if !testenv.Poll(30*time.Second, 50*time.Millisecond, time.Second, func() bool {
		return readFileOr(ctx, h3, d1, "/tmp/typed") != ""
	}) {
		t.Fatal("the line typed during the move did not arrive")
	}
	if got := readFile(ctx, t, h3, d1, "/tmp/typed"); got != "typed\n" {
		t.Fatalf("typed during the move: %q, want one line", got)
	}
	viewerSeesFrame(ctx, t, h1, d1, tok.Token)

	// A move to a host without room is refused before anything moves:
	// h2 is full again once it runs a third desktop.
	d4, err := h2.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: baked.Snapshot.Name})
	if err != nil || d4.Host != "h2" {
		h2.fail("create: %+v, %v; want it on h2", d4, err)
	}
	ids = append(ids, d4.ID)
	var ce *client.Error
	if _, err := h1.c.MoveDesktop(ctx, d1, "h2"); !errors.As(err, &ce) || ce.Status != http.StatusInsufficientStorage {
		t.Fatalf("a move to a full host: %v; want 507", err)
	}
	if got := hostOf(ctx, t, h1, d1); got != "h3 running" {
		t.Fatalf("after a refused move the desktop is listed %q, want h3 running", got)
	}
	if _, err := h1.c.MoveDesktop(ctx, d1, "h3"); !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		t.Fatalf("a move to the desktop's own host: %v; want 400", err)
	}
	waitCounterPast(ctx, t, h1, d1, counter(ctx, t, h1, d1))

	// h1 dies in the stream: the desktop runs on on h2.
	d2 := ids[1]
	if _, err := h2.c.MoveDesktop(ctx, d2, "h1"); err == nil {
		t.Fatal("a move whose target died mid-stream succeeded")
	}
	<-h1.exited
	listedAs(ctx, t, h2, d2, "h2 running")
	shell(ctx, t, h2, d2, "true")
	// Started again once its lease ran out (a host of the same name at
	// another address is refused while the old one is listed).
	listsAll(ctx, t, h2, 2)
	h1.env = nil
	startAgain(t, h1)
	listsAll(ctx, t, h2, 3)

	// h3 dies right after the switch: the desktop runs on h1, where the
	// person who took control of it keeps it.
	if err := h1.c.Do(ctx, http.MethodPost, "/v1/desktops/"+d1+"/control", api.SetControl{Holder: "person", By: "alice"}, nil); err != nil {
		t.Fatalf("take control: %v", err)
	}
	beforeSwitch := counter(ctx, t, h1, d1)
	if _, err := h2.c.MoveDesktop(ctx, d1, "h1"); err != nil {
		// The answer may or may not have reached h2 before h3 died.
		t.Logf("move from a source that died after the switch: %v", err)
	}
	<-h3.exited
	listedAs(ctx, t, h1, d1, "h1 running")
	waitCounterPast(ctx, t, h1, d1, beforeSwitch)
	if got, err := h1.c.Desktop(ctx, d1); err != nil || got.Control.Holder != "person" || got.Control.By != "alice" {
		t.Fatalf("after the move the desktop's control is %+v (%v); want alice's", got.Control, err)
	}
	listsAll(ctx, t, h1, 2)
	h3.env = nil
	startAgain(t, h3)
	listsAll(ctx, t, h1, 3)

	// hostd fleet drain h2 --move: its three desktops go to the others,
	// and h2 then stops without ending any.
	t.Setenv("WARMDESK_ADDR", h1.c.BaseURL)
	t.Setenv("WARMDESK_TOKEN", h1.c.Token)
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, []string{"fleet", "drain", "--move", "h2"}, &out, &errOut); code != 0 {
		h2.fail("hostd fleet drain --move h2: exit %d: %s%s", code, out.String(), errOut.String())
	}
	t.Logf("drain --move: %s", out.String())
	h2.kill()
	for _, id := range ids[1:] {
		var got string
		if !testenv.Poll(30*time.Second, 50*time.Millisecond, time.Second, func() bool {
			got = listed(ctx, h1, id)
			return strings.HasSuffix(got, " running") && !strings.HasPrefix(got, "h2")
		}) {
			t.Fatalf("after the drain, desktop %s is listed %q; want running on h1 or h3", id, got)
		}
		shell(ctx, t, h1, id, "true")
	}
}

// startAgain starts a killed host again. Its old lease may still hold its
// name a moment after the others stopped listing it (they list by what
// each lease says, the name is refused while the key lasts): a start
// refused for that is tried again, up to 30 s.
func startAgain(t *testing.T, h *host) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.start()
		addrFile := filepath.Join(h.state, "address")
		testenv.Poll(3*time.Minute, 10*time.Millisecond, 200*time.Millisecond, func() bool {
			select {
			case <-h.exited:
				return true
			default:
			}
			_, err := os.Stat(addrFile)
			return err == nil
		})
		select {
		case <-h.exited:
			out, _ := os.ReadFile(h.log)
			if strings.Contains(string(out), "another live host of the fleet has this name") && time.Now().Before(deadline) {
				continue
			}
		default:
		}
		h.ready()
		return
	}
}

// listsAll waits until h lists n hosts.
func listsAll(ctx context.Context, t *testing.T, h *host, n int) {
	t.Helper()
	var got []string
	if !testenv.Poll(time.Minute, 20*time.Millisecond, 500*time.Millisecond, func() bool {
		got, _, _ = names(ctx, h)
		return len(got) == n
	}) {
		h.fail("%s lists %v, want %d hosts", h.name, got, n)
	}
}

// listed is "HOST STATE" of desktop id in h's fleet-wide list, or why
// there is none.
func listed(ctx context.Context, h *host, id string) string {
	ds, err := h.c.Desktops(ctx)
	if err != nil {
		return err.Error()
	}
	for _, d := range ds {
		if d.ID == id {
			return d.Host + " " + d.State
		}
	}
	return "not listed"
}

// listedAs waits until h lists desktop id as want ("HOST STATE"): a host
// killed takes its etcd member with it, and the list fails until the
// others have a leader again.
func listedAs(ctx context.Context, t *testing.T, h *host, id, want string) {
	t.Helper()
	var got string
	if !testenv.Poll(30*time.Second, 50*time.Millisecond, time.Second, func() bool {
		got = listed(ctx, h, id)
		return got == want
	}) {
		h.fail("%s lists desktop %s as %q, want %q", h.name, id, got, want)
	}
}

// hostOf is "HOST STATE" of desktop id in h's fleet-wide list.
func hostOf(ctx context.Context, t *testing.T, h *host, id string) string {
	t.Helper()
	ds, err := h.c.Desktops(ctx)
	if err != nil {
		h.fail("list through %s: %v", h.name, err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d.Host + " " + d.State
		}
	}
	return ""
}

func shell(ctx context.Context, t *testing.T, h *host, id, cmd string) string {
	t.Helper()
	out, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: cmd})
	if err != nil || out.ExitCode != 0 {
		h.fail("exec %q through %s: %+v, %v", cmd, h.name, out, err)
	}
	return out.Stdout
}

func readFileOr(ctx context.Context, h *host, id, path string) string {
	var b bytes.Buffer
	if _, err := h.c.ReadFile(ctx, id, path, &b); err != nil {
		return ""
	}
	return b.String()
}

func readFile(ctx context.Context, t *testing.T, h *host, id, path string) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := h.c.ReadFile(ctx, id, path, &b); err != nil {
		h.fail("read %s through %s: %v", path, h.name, err)
	}
	return b.String()
}

// counter is the guest's counter now.
func counter(ctx context.Context, t *testing.T, h *host, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(readFile(ctx, t, h, id, "/tmp/counter")))
	if err != nil {
		t.Fatalf("the guest's counter: %v", err)
	}
	return n
}

// waitCounterPast waits until the guest's counter passes n: it still counts.
func waitCounterPast(ctx context.Context, t *testing.T, h *host, id string, n int) {
	t.Helper()
	if !testenv.Poll(30*time.Second, 50*time.Millisecond, 500*time.Millisecond, func() bool {
		c, err := strconv.Atoi(strings.TrimSpace(readFileOr(ctx, h, id, "/tmp/counter")))
		return err == nil && c > n
	}) {
		t.Fatalf("the guest's counter stayed at %d", n)
	}
}

// viewerSeesFrame opens the viewer's socket through h with a viewer's
// token and reads the RFB banner.
func viewerSeesFrame(ctx context.Context, t *testing.T, h *host, id, token string) {
	t.Helper()
	openViewer(ctx, t, h, id, token).Close()
}

// openViewer opens the viewer's socket through h with a viewer's token,
// reads the RFB banner and returns the socket.
func openViewer(ctx context.Context, t *testing.T, h *host, id, token string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(h.c.BaseURL, "http") + "/v1/desktops/" + id + "/vnc"
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		status := "no answer"
		if resp != nil {
			status = resp.Status
		}
		h.fail("viewer socket through %s with the viewer's token: %s, %v", h.name, status, err)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, banner, err := ws.ReadMessage(); err != nil || !strings.HasPrefix(string(banner), "RFB ") {
		h.fail("viewer socket through %s: first message %q, %v; want the RFB banner", h.name, banner, fmt.Sprint(err))
	}
	ws.SetReadDeadline(time.Time{})
	return ws
}
