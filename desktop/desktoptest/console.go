package desktoptest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// The console checks: what a desktop offers those who drive and watch it
// (input, the guest agent, VNC), on every driver.

// A key and a pointer move each change the screen: the key shows in the
// focused window, the pointer is drawn where it went.
func inputReachesMachine(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	m := e.machine(t, d.ID)
	w, ht := e.screenSize(t)
	ctx := e.ctx(t)

	base := e.settled(t, m)
	key := []desktop.InputEvent{{Kind: desktop.InputKey, Key: "x", Down: true}, {Kind: desktop.InputKey, Key: "x"}}
	if err := m.SendInput(ctx, key); err != nil {
		t.Fatalf("send a key: %v", err)
	}
	if !e.waitScreen(ctx, m, func(now image.Image) bool { return differs(base, now, base.Bounds()) }) {
		t.Fatal("a key typed changed nothing on the screen")
	}

	// Away from the pointer's resting place (a restored X server keeps
	// its pointer where it was, at first the middle of the screen) and
	// from where the key showed.
	base = e.settled(t, m)
	p := image.Pt(w*3/4, ht*3/4)
	around := image.Rect(p.X-8, p.Y-8, p.X+32, p.Y+32).Intersect(base.Bounds())
	if err := m.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: p.X, Y: p.Y}}); err != nil {
		t.Fatalf("send a move: %v", err)
	}
	if !e.waitScreen(ctx, m, func(now image.Image) bool { return differs(base, now, around) }) {
		t.Fatalf("the pointer moved to %v but nothing changed around it", p)
	}
	// Input outside the screen is refused, not clamped.
	if err := m.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: w, Y: 0}}); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("a move off the screen: %v, want ErrInvalid", err)
	}
	e.remove(t, d.ID)
}

// The guest agent answers: ping, its version and commands, an error (not a
// hang) for a command it does not know, and with a guest OS a shell.
func guestAgentAnswers(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	ctx := e.ctx(t)
	m, _, err := e.mgr.Machine(ctx, d.ID, desktop.WaitSetUp)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Agent()
	if err := a.Call(ctx, "guest-ping", nil, nil); err != nil {
		t.Fatalf("guest-ping: %v", err)
	}
	var info struct {
		Version  string `json:"version"`
		Commands []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"supported_commands"`
	}
	if err := a.Call(ctx, "guest-info", nil, &info); err != nil {
		t.Fatalf("guest-info: %v", err)
	}
	exec := false
	for _, c := range info.Commands {
		exec = exec || (c.Name == "guest-exec" && c.Enabled)
	}
	if info.Version == "" || !exec {
		t.Errorf("guest-info: version %q, guest-exec enabled %v", info.Version, exec)
	}
	err = a.Call(ctx, "guest-no-such-command", nil, nil)
	if err == nil || errors.Is(err, desktop.ErrUnavailable) {
		t.Errorf("an unknown command: %v, want the agent's error", err)
	}
	if err := a.Call(ctx, "guest-ping", nil, nil); err != nil {
		t.Errorf("guest-ping after an error: %v", err)
	}
	e.guestAlive(t, d.ID)
	e.remove(t, d.ID)
}

// DialVNC gives a working RFB stream, to more than one viewer at once:
// each gets the greeting, the handshake, the screen's size and a frame.
func vncServesRFB(t *testing.T, h Harness) {
	e := open(t, h)
	d := e.create(t)
	m := e.machine(t, d.ID)
	w, ht := e.screenSize(t)
	ctx := e.ctx(t)
	var conns []net.Conn
	var servers []rfbServer
	for i := range 2 {
		c, err := m.DialVNC(ctx)
		if err != nil {
			t.Fatalf("dial VNC (viewer %d): %v", i+1, err)
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
		srv, err := rfbHandshake(c)
		if err != nil {
			t.Fatalf("viewer %d: %v", i+1, err)
		}
		if srv.size != image.Pt(w, ht) {
			t.Errorf("viewer %d: the server says the screen is %v, the snapshot %dx%d", i+1, srv.size, w, ht)
		}
		conns = append(conns, c)
		servers = append(servers, srv)
	}
	for i, c := range conns {
		if err := rfbFrame(c, servers[i]); err != nil {
			t.Errorf("viewer %d: %v", i+1, err)
		}
	}
	e.remove(t, d.ID)
}

// rfbServer is what ServerInit says.
type rfbServer struct {
	size          image.Point
	bytesPerPixel int
}

// rfbHandshake speaks the client's side of RFB 3.8 (RFC 6143, 7.1 to 7.3)
// up to ServerInit, with no security (VNC is only on a 0700 unix socket).
// It asks for a shared session, so other viewers stay connected.
func rfbHandshake(c net.Conn) (rfbServer, error) {
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(c, greeting); err != nil {
		return rfbServer{}, fmt.Errorf("read the greeting: %w", err)
	}
	if !bytes.HasPrefix(greeting, []byte("RFB 003.00")) || greeting[11] != '\n' {
		return rfbServer{}, fmt.Errorf("greeting %q is not RFB 3.x", greeting)
	}
	if string(greeting) != "RFB 003.008\n" {
		return rfbServer{}, fmt.Errorf("server speaks %q, want RFB 003.008", strings.TrimSpace(string(greeting)))
	}
	if _, err := c.Write(greeting); err != nil {
		return rfbServer{}, err
	}
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return rfbServer{}, fmt.Errorf("read the security types: %w", err)
	}
	if n[0] == 0 {
		return rfbServer{}, fmt.Errorf("the server refused the connection: %s", rfbReason(c))
	}
	types := make([]byte, n[0])
	if _, err := io.ReadFull(c, types); err != nil {
		return rfbServer{}, fmt.Errorf("read the security types: %w", err)
	}
	if !bytes.Contains(types, []byte{1}) {
		return rfbServer{}, fmt.Errorf("security types %v lack None (1)", types)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return rfbServer{}, err
	}
	var result [4]byte
	if _, err := io.ReadFull(c, result[:]); err != nil {
		return rfbServer{}, fmt.Errorf("read the security result: %w", err)
	}
	if binary.BigEndian.Uint32(result[:]) != 0 {
		return rfbServer{}, fmt.Errorf("security handshake failed: %s", rfbReason(c))
	}
	if _, err := c.Write([]byte{1}); err != nil { // ClientInit, shared
		return rfbServer{}, err
	}
	init := make([]byte, 24)
	if _, err := io.ReadFull(c, init); err != nil {
		return rfbServer{}, fmt.Errorf("read ServerInit: %w", err)
	}
	bpp, trueColour := init[4], init[7]
	if (bpp != 8 && bpp != 16 && bpp != 32) || trueColour != 1 {
		return rfbServer{}, fmt.Errorf("pixel format %v: %d bits per pixel, true colour %d", init[4:20], bpp, trueColour)
	}
	nameLen := binary.BigEndian.Uint32(init[20:])
	if nameLen > 1<<16 {
		return rfbServer{}, fmt.Errorf("desktop name of %d bytes", nameLen)
	}
	if _, err := io.CopyN(io.Discard, c, int64(nameLen)); err != nil {
		return rfbServer{}, fmt.Errorf("read the desktop name: %w", err)
	}
	size := image.Pt(int(binary.BigEndian.Uint16(init[0:])), int(binary.BigEndian.Uint16(init[2:])))
	return rfbServer{size: size, bytesPerPixel: int(bpp) / 8}, nil
}

// rfbFrame asks for the whole screen (a non-incremental
// FramebufferUpdateRequest; in the pixel format of ServerInit and raw, as
// the client set neither) and reads the first rectangle of the answer,
// pixels included.
func rfbFrame(c net.Conn, srv rfbServer) error {
	screen := image.Rectangle{Max: srv.size}
	req := []byte{3, 0, 0, 0, 0, 0}
	req = binary.BigEndian.AppendUint16(req, uint16(screen.Dx()))
	req = binary.BigEndian.AppendUint16(req, uint16(screen.Dy()))
	if _, err := c.Write(req); err != nil {
		return err
	}
	head := make([]byte, 4+12)
	if _, err := io.ReadFull(c, head); err != nil {
		return fmt.Errorf("read the framebuffer update: %w", err)
	}
	if head[0] != 0 {
		return fmt.Errorf("the server answered with message type %d, want a FramebufferUpdate (0)", head[0])
	}
	if binary.BigEndian.Uint16(head[2:]) == 0 {
		return errors.New("a framebuffer update without rectangles")
	}
	u16 := func(i int) int { return int(binary.BigEndian.Uint16(head[4+2*i:])) }
	r := image.Rect(u16(0), u16(1), u16(0)+u16(2), u16(1)+u16(3))
	if enc := int32(binary.BigEndian.Uint32(head[12:])); enc != 0 {
		return fmt.Errorf("rectangle %v in encoding %d, want raw (0): the client asked for none other", r, enc)
	}
	if r.Empty() || !r.In(screen) {
		return fmt.Errorf("rectangle %v is not on the %v screen", r, screen.Size())
	}
	n, err := io.CopyN(io.Discard, c, int64(r.Dx()*r.Dy()*srv.bytesPerPixel))
	if err != nil {
		return fmt.Errorf("read the pixels of %v after %d bytes: %w", r, n, err)
	}
	return nil
}

// rfbReason reads the reason string a server sends with a refusal.
func rfbReason(c net.Conn) string {
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return "(no reason given)"
	}
	reason := make([]byte, min(binary.BigEndian.Uint32(n[:]), 4096))
	io.ReadFull(c, reason)
	return string(reason)
}

// screenSize is the resolution of the harness's snapshot.
func (e *env) screenSize(t *testing.T) (int, int) {
	t.Helper()
	snap, err := e.catalog.Get(e.h.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Manifest.Machine.Width, snap.Manifest.Machine.Height
}

// screenQuiet is how long a screen must stay unchanged to count as settled.
const screenQuiet = 500 * time.Millisecond

// settled waits until the machine's screen has not changed for
// screenQuiet and returns it, so that what changes next is caused by what
// the check does next.
func (e *env) settled(t *testing.T, m desktop.Machine) image.Image {
	t.Helper()
	ctx := e.ctx(t)
	last, err := m.Screendump(ctx)
	if err != nil {
		t.Fatalf("screendump: %v", err)
	}
	since := time.Now()
	ok := waitFor(ctx, func() bool {
		now, err := m.Screendump(ctx)
		if err != nil {
			return false
		}
		if differs(last, now, last.Bounds()) {
			last, since = now, time.Now()
		}
		return time.Since(since) >= screenQuiet
	})
	if !ok {
		t.Fatalf("the screen did not stay still for %s", screenQuiet)
	}
	return last
}

// waitScreen waits until the machine's screen satisfies cond.
func (e *env) waitScreen(ctx context.Context, m desktop.Machine, cond func(image.Image) bool) bool {
	return waitFor(ctx, func() bool {
		img, err := m.Screendump(ctx)
		return err == nil && cond(img)
	})
}

// differs reports whether two pictures differ inside r.
func differs(a, b image.Image, r image.Rectangle) bool {
	if a.Bounds() != b.Bounds() {
		return true
	}
	ra, okA := a.(*image.RGBA)
	rb, okB := b.(*image.RGBA)
	if okA && okB && r == a.Bounds() {
		return !bytes.Equal(ra.Pix, rb.Pix)
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				return true
			}
		}
	}
	return false
}
