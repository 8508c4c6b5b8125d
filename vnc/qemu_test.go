package vnc

import (
	"context"
	"errors"
	"image"
	"image/color"
	"net"
	"testing"
	"time"
)

// Tests against a real QEMU VNC server. They skip in -short mode and when
// QEMU is missing (but fail when CI=true).

func startQEMUMirror(t *testing.T, vm *qemuVM, opts MirrorOptions) *Mirror {
	t.Helper()
	if opts.Dial == nil {
		opts.Dial = vm.dial
	}
	opts.Logger = testLogger(t)
	m := NewMirror(opts)
	runMirror(t, m)
	waitClosed(t, m.Ready(), 30*time.Second, "the first frame from QEMU")
	return m
}

// waitSize waits for the mirror to hold a frame of the given size. QEMU
// starts at 640x480, SeaBIOS switches to 720x400 text, and the boot sector
// to 320x200, which QEMU shows as 640x400.
func waitSize(t *testing.T, m *Mirror, size image.Point) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for m.Size() != size {
		_, ch := m.Changed()
		select {
		case <-ch:
		case <-tick.C:
			m.Poke()
		case <-deadline:
			t.Fatalf("screen still %v, want %v", m.Size(), size)
		}
	}
}

// waitBootedPainter waits for the boot sector's black screen.
func waitBootedPainter(t *testing.T, vm *qemuVM, m *Mirror) {
	t.Helper()
	waitSize(t, m, image.Pt(640, 400))
	if img := mirrorMatches(t, vm, m, 30*time.Second); img.RGBAAt(0, 0) != (color.RGBA{0, 0, 0, 255}) {
		t.Fatalf("painter screen %v, want black", img.RGBAAt(0, 0))
	}
}

func TestQEMUHandshake(t *testing.T) {
	vm := startQEMU(t, qemuOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := vm.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ctx, conn, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	si := c.ServerInit()
	if si.Width == 0 || si.Height == 0 || si.Name != "QEMU" || si.PixelFormat.BitsPerPixel != 32 {
		t.Fatalf("server init %+v", si)
	}
	// QEMU acknowledges extended key events right after SetEncodings.
	if err := c.RequestUpdate(ctx, false, image.Pt(si.Width, si.Height)); err != nil {
		t.Fatal(err)
	}
	for !c.ExtendedKeyEvents() {
		if _, err := c.ReadMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQEMUPassword(t *testing.T) {
	vm := startQEMU(t, qemuOptions{password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := vm.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(ctx, conn, ClientOptions{Password: "wrong"}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	m := startQEMUMirror(t, vm, MirrorOptions{Password: "s3cret"})
	mirrorMatches(t, vm, m, 30*time.Second)
}

func TestQEMUMirrorEqualsScreendump(t *testing.T) {
	t.Run("SeaBIOS text", func(t *testing.T) {
		vm := startQEMU(t, qemuOptions{})
		m := startQEMUMirror(t, vm, MirrorOptions{})
		waitSize(t, m, image.Pt(720, 400))
		// Match a screen with text on it, not the blank one before SeaBIOS
		// prints.
		deadline := time.After(60 * time.Second)
		for {
			img := mirrorMatches(t, vm, m, 30*time.Second)
			if n := litPixels(img); n > 1000 {
				t.Logf("matched a %v screendump with %d lit pixels", img.Rect.Size(), n)
				break
			}
			n, ch := m.Changed()
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("no text on screen (counter %d)", n)
			}
		}
	})
	t.Run("mode 13h after a resize", func(t *testing.T) {
		vm := startQEMU(t, qemuOptions{boot: true})
		m := startQEMUMirror(t, vm, MirrorOptions{})
		waitBootedPainter(t, vm, m)
		vm.sendKey(t, "a") // two scancodes: palette colour 2
		deadline := time.After(30 * time.Second)
		for {
			img := mirrorMatches(t, vm, m, 30*time.Second)
			if img.RGBAAt(0, 0) == (color.RGBA{0, 0xa8, 0, 255}) {
				break
			}
			select {
			case <-deadline:
				t.Fatalf("screen colour %v, want palette 2", img.RGBAAt(0, 0))
			default:
			}
		}
	})
}

func TestQEMUCounterMovesOnSystemReset(t *testing.T) {
	vm := startQEMU(t, qemuOptions{})
	m := startQEMUMirror(t, vm, MirrorOptions{})
	mirrorMatches(t, vm, m, 30*time.Second)
	before, _ := m.Changed()
	vm.mustQMP(t, "system_reset", nil)
	waitChange(t, m, before, 30*time.Second)
	mirrorMatches(t, vm, m, 30*time.Second)
}

func litPixels(img *image.RGBA) int {
	n := 0
	for i := 0; i < len(img.Pix); i += 4 {
		if img.Pix[i]|img.Pix[i+1]|img.Pix[i+2] != 0 {
			n++
		}
	}
	return n
}

func TestQEMUReconnectAfterRestart(t *testing.T) {
	vm1 := startQEMU(t, qemuOptions{})
	dials := make(chan error, 256)
	path := vm1.vncPath
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		select {
		case dials <- err:
		default:
		}
		return c, err
	}
	m := startQEMUMirror(t, vm1, MirrorOptions{Dial: dial})
	waitSize(t, m, image.Pt(720, 400))
	mirrorMatches(t, vm1, m, 30*time.Second)

	vm1.kill() // as hibernation does
	waitDialError := func() {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case err := <-dials:
				if err != nil {
					return
				}
			case <-deadline:
				t.Fatal("the mirror did not try to redial")
			}
		}
	}
	waitDialError()
	if m.Connected() {
		t.Fatal("connected to a dead QEMU")
	}
	held, n := m.Frame(nil)
	waitDialError()
	if again, n2 := m.Frame(nil); n2 != n || !sameImage(again, held) || litPixels(held) == 0 {
		t.Fatal("the picture did not survive the disconnection")
	}

	// A new QEMU on the same socket path, showing something else.
	vm2 := startQEMU(t, qemuOptions{dir: vm1.dir, boot: true})
	m.Reconnect()
	waitBootedPainter(t, vm2, m)
	if !m.Connected() {
		t.Fatal("not connected to the new QEMU")
	}
}
