package vnc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Real-QEMU test helpers: a VNC server without any guest (SeaBIOS text, then
// "No bootable device"), or with a 35-byte boot sector that switches to VGA
// mode 13h and repaints the whole screen in the next palette colour for
// every byte it reads from the keyboard controller. The first screen blinks
// its text cursor; the second stays still until a key arrives, which makes
// it the one to measure QEMU's refresh behaviour with.

// requireQEMU skips the test without QEMU, unless CI=true, when it fails.
func requireQEMU(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-QEMU test skipped in -short mode")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("qemu-system-x86_64 is required when CI=true: %v", err)
		}
		t.Skipf("qemu-system-x86_64 not installed: %v", err)
	}
}

// bootSector, at 0x7c00: cli; cld; mov ax,0x13; int 0x10; xor bx,bx;
// mov ax,0xa000; mov es,ax; fill: xor di,di; mov al,bl; mov cx,64000;
// rep stosb; wait: in al,0x64; test al,1; jz wait; in al,0x60; inc bl;
// jmp fill.
var bootSector = []byte{
	0xfa, 0xfc, 0xb8, 0x13, 0x00, 0xcd, 0x10, 0x31, 0xdb, 0xb8, 0x00, 0xa0, 0x8e, 0xc0,
	0x31, 0xff, 0x88, 0xd8, 0xb9, 0x00, 0xfa, 0xf3, 0xaa,
	0xe4, 0x64, 0xa8, 0x01, 0x74, 0xfa, 0xe4, 0x60, 0xfe, 0xc3, 0xeb, 0xeb,
}

type qemuOptions struct {
	dir      string   // reuse a directory, and so the socket path
	boot     bool     // boot the painter instead of no device
	password string   // VNC password (password=on)
	trace    []string // trace event patterns; lines are kept in vm.trace
}

type qemuVM struct {
	dir     string
	vncPath string
	cmd     *exec.Cmd
	qmp     *qmpClient
	trace   *lineLog
	waited  chan struct{}
}

func startQEMU(t testing.TB, opts qemuOptions) *qemuVM {
	t.Helper()
	requireQEMU(t)
	dir := opts.dir
	if dir == "" {
		dir = t.TempDir()
	}
	vm := &qemuVM{dir: dir, vncPath: filepath.Join(dir, "vnc.sock"), trace: newLineLog(), waited: make(chan struct{})}

	// QEMU gets QMP as a socket that already listens, so the test can
	// connect at once; QMP answers commands only once QEMU's main loop
	// runs, and by then its VNC socket listens too.
	qmpPath := filepath.Join(dir, "qmp.sock")
	os.Remove(qmpPath)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: qmpPath, Net: "unix"})
	if err != nil {
		t.Fatalf("qmp listen: %v", err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatalf("qmp listener file: %v", err)
	}
	defer lnFile.Close()

	vncArg := "unix:" + vm.vncPath + ",share=force-shared"
	if opts.password != "" {
		vncArg += ",password=on"
	}
	args := []string{
		"-nodefaults", "-machine", "q35", "-accel", "tcg", "-m", "64", "-vga", "std", "-display", "none",
		"-vnc", vncArg,
		"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
	}
	if opts.boot {
		img := append(append([]byte(nil), bootSector...), make([]byte, 1<<20-len(bootSector))...)
		img[510], img[511] = 0x55, 0xaa
		path := filepath.Join(dir, "boot.img")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-drive", "file="+path+",format=raw,if=ide")
	}
	for _, ev := range opts.trace {
		args = append(args, "-trace", "enable="+ev)
	}
	vm.cmd = exec.Command("qemu-system-x86_64", args...)
	vm.cmd.ExtraFiles = []*os.File{lnFile}
	stderr, err := vm.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			vm.trace.add(sc.Text())
		}
		vm.cmd.Wait()
		close(vm.waited)
	}()
	t.Cleanup(vm.kill)

	vm.qmp, err = dialQMP(qmpPath)
	if err != nil {
		t.Fatalf("qmp: %v (qemu said: %s)", err, vm.trace.String())
	}
	if _, err := vm.qmp.execute("query-vnc", nil); err != nil {
		t.Fatalf("query-vnc: %v", err)
	}
	if opts.password != "" {
		if _, err := vm.qmp.execute("set_password", map[string]any{"protocol": "vnc", "password": opts.password}); err != nil {
			t.Fatalf("set_password: %v", err)
		}
	}
	return vm
}

func (vm *qemuVM) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", vm.vncPath)
}

// kill ends QEMU at once, as a crash or a hibernation would.
func (vm *qemuVM) kill() {
	if vm.qmp != nil {
		vm.qmp.close()
	}
	vm.cmd.Process.Kill()
	<-vm.waited
}

func (vm *qemuVM) mustQMP(t testing.TB, cmd string, args map[string]any) json.RawMessage {
	t.Helper()
	ret, err := vm.qmp.execute(cmd, args)
	if err != nil {
		t.Fatalf("qmp %s: %v", cmd, err)
	}
	return ret
}

// sendKey presses and releases a key through QMP, not VNC, as agents'
// input does; QEMU's VNC refresh interval does not notice.
func (vm *qemuVM) sendKey(t testing.TB, qcode string) {
	vm.mustQMP(t, "send-key", map[string]any{"keys": []map[string]any{{"type": "qcode", "data": qcode}}})
}

// keyEvent sends a single key press or release through QMP.
func (vm *qemuVM) keyEvent(t testing.TB, qcode string, down bool) {
	vm.mustQMP(t, "input-send-event", map[string]any{"events": []map[string]any{{
		"type": "key", "data": map[string]any{"down": down, "key": map[string]any{"type": "qcode", "data": qcode}},
	}}})
}

// screendump returns QEMU's own picture of the console.
func (vm *qemuVM) screendump(t testing.TB) *image.RGBA {
	t.Helper()
	path := filepath.Join(vm.dir, "screendump.ppm")
	vm.mustQMP(t, "screendump", map[string]any{"filename": path})
	img, err := readPPM(path)
	if err != nil {
		t.Fatalf("screendump: %v", err)
	}
	return img
}

func (vm *qemuVM) vncClients(t testing.TB) int {
	var info struct {
		Clients []json.RawMessage `json:"clients"`
	}
	if err := json.Unmarshal(vm.mustQMP(t, "query-vnc", nil), &info); err != nil {
		t.Fatal(err)
	}
	return len(info.Clients)
}

// readPPM reads the binary PPM (P6, maxval 255) that screendump writes.
func readPPM(path string) (*image.RGBA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fields := make([]int, 0, 3)
	rest := data
	if !bytes.HasPrefix(rest, []byte("P6")) {
		return nil, errors.New("not a P6 file")
	}
	rest = rest[2:]
	for len(fields) < 3 {
		rest = bytes.TrimLeft(rest, " \t\r\n")
		end := bytes.IndexAny(rest, " \t\r\n")
		if end < 0 {
			return nil, errors.New("truncated header")
		}
		n, err := strconv.Atoi(string(rest[:end]))
		if err != nil {
			return nil, err
		}
		fields = append(fields, n)
		rest = rest[end:]
	}
	rest = rest[1:] // the single whitespace byte after maxval
	w, h := fields[0], fields[1]
	if fields[2] != 255 || len(rest) < w*h*3 {
		return nil, fmt.Errorf("maxval %d, %d bytes for %dx%d", fields[2], len(rest), w, h)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		copy(img.Pix[i*4:i*4+3], rest[i*3:i*3+3])
		img.Pix[i*4+3] = 255
	}
	return img, nil
}

// waitMatchesScreendump waits until the mirror's frame equals QEMU's
// screendump pixel for pixel, taking a new screendump whenever the mirror
// changes or every 50 ms (the text cursor blinks).
func waitMatchesScreendump(t testing.TB, vm *qemuVM, frame func() *image.RGBA, changed func() <-chan struct{}, d time.Duration) *image.RGBA {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var want, got *image.RGBA
	for {
		ch := changed()
		want = vm.screendump(t)
		got = frame()
		if sameImage(got, want) {
			return got
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("frame %v never matched QEMU's screendump %v within %v (%d pixels differ)",
				got.Rect, want.Rect, d, differingPixels(got, want))
		}
	}
}

func differingPixels(a, b *image.RGBA) int {
	if a.Rect.Size() != b.Rect.Size() {
		return -1
	}
	n := 0
	for i := 0; i < len(a.Pix); i += 4 {
		if !bytes.Equal(a.Pix[i:i+3], b.Pix[i:i+3]) {
			n++
		}
	}
	return n
}

func mirrorMatches(t testing.TB, vm *qemuVM, m *Mirror, d time.Duration) *image.RGBA {
	t.Helper()
	return waitMatchesScreendump(t, vm,
		func() *image.RGBA { img, _ := m.Frame(nil); return img },
		func() <-chan struct{} { m.Poke(); _, ch := m.Changed(); return ch }, d)
}

// lineLog collects QEMU's stderr (trace output) and lets tests wait for it.
type lineLog struct {
	mu     sync.Mutex
	lines  []string
	signal chan struct{}
}

func newLineLog() *lineLog { return &lineLog{signal: make(chan struct{})} }

func (l *lineLog) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	close(l.signal)
	l.signal = make(chan struct{})
	l.mu.Unlock()
}

// count returns how many lines contain s, and a channel closed at the next
// line.
func (l *lineLog) count(s string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n, l.signal
}

// waitCount waits until at least n lines contain s.
func (l *lineLog) waitCount(t testing.TB, s string, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		got, ch := l.count(s)
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d QEMU lines with %q within %v; log:\n%s", got, n, s, d, l.String())
		}
	}
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// qmpClient is a minimal QMP client: one command at a time, events skipped.
type qmpClient struct {
	conn net.Conn
	dec  *json.Decoder
	mu   sync.Mutex
}

func dialQMP(path string) (*qmpClient, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	c := &qmpClient{conn: conn, dec: json.NewDecoder(conn)}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var greeting map[string]json.RawMessage
	if err := c.dec.Decode(&greeting); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := c.execute("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *qmpClient) execute(cmd string, args map[string]any) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	if err := json.NewEncoder(c.conn).Encode(req); err != nil {
		return nil, err
	}
	for {
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class, Desc string
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := c.dec.Decode(&resp); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("qmp %s: connection closed", cmd)
			}
			return nil, err
		}
		switch {
		case resp.Event != "":
			continue
		case resp.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
		default:
			return resp.Return, nil
		}
	}
}

func (c *qmpClient) close() { c.conn.Close() }
