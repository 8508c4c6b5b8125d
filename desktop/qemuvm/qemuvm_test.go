package qemuvm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/desktop/qemuvm/qemuvmtest"
)

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Every migration, whichever driver runs it, lifts QEMU's bandwidth cap
// and asks for MIGRATION events before it starts, and subscribes before
// the command that starts it.
func TestMigrationSetsCapabilitiesAndBandwidthFirst(t *testing.T) {
	for _, incoming := range []bool{false, true} {
		mon := qemuvmtest.New()
		start := "migrate"
		if incoming {
			start = "migrate-incoming"
		}
		mon.Handle(start, func(json.RawMessage) (any, error) {
			if mon.Subscribers() != 1 {
				t.Errorf("%s ran with %d subscribers, want 1", start, mon.Subscribers())
			}
			mon.Emit("MIGRATION", map[string]string{"status": "setup"})
			mon.Emit("STOP", nil)
			mon.Emit("MIGRATION", map[string]string{"status": "completed"})
			return map[string]any{}, nil
		})
		mon.Reply("query-status", map[string]string{"status": "postmigrate"})
		err := qemuvm.Migrate(ctx(t), mon, qemuvm.Migration{Incoming: incoming, URI: "fd:state", IgnoreShared: true})
		if err != nil {
			t.Fatal(err)
		}
		wantNames := []string{"migrate-set-capabilities", "migrate-set-parameters", start}
		if !incoming {
			wantNames = append(wantNames, "query-status") // finalized?
		}
		if got := mon.Names(); !slices.Equal(got, wantNames) {
			t.Fatalf("commands %v, want %v", got, wantNames)
		}
		cmds := mon.Commands()
		var caps struct {
			Capabilities []struct {
				Capability string
				State      bool
			}
		}
		json.Unmarshal(cmds[0].Args, &caps)
		want := map[string]bool{"x-ignore-shared": true, "events": true}
		for _, c := range caps.Capabilities {
			if want[c.Capability] != c.State {
				t.Errorf("capability %s = %v", c.Capability, c.State)
			}
			delete(want, c.Capability)
		}
		if len(want) > 0 {
			t.Errorf("capabilities %s not set", cmds[0].Args)
		}
		var params struct {
			MaxBandwidth int64 `json:"max-bandwidth"`
		}
		json.Unmarshal(cmds[1].Args, &params)
		if params.MaxBandwidth < 1<<40 {
			t.Errorf("max-bandwidth %d: the 128 MiB/s cap is not lifted", params.MaxBandwidth)
		}
		if string(cmds[2].Args) != `{"uri":"fd:state"}` {
			t.Errorf("%s args %s", start, cmds[2].Args)
		}
		if n := mon.Subscribers(); n != 0 {
			t.Errorf("%d subscriptions left open", n)
		}
	}
}

// An outgoing migration ends once its source has left finish-migrate,
// which QEMU reaches a moment after it says completed: cont is refused
// until then.
func TestOutgoingMigrationWaitsUntilFinalized(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Handle("migrate", func(json.RawMessage) (any, error) {
		mon.Emit("MIGRATION", map[string]string{"status": "completed"})
		return map[string]any{}, nil
	})
	polls := 0
	mon.Handle("query-status", func(json.RawMessage) (any, error) {
		polls++
		if polls < 3 {
			return map[string]string{"status": "finish-migrate"}, nil
		}
		return map[string]string{"status": "postmigrate"}, nil
	})
	if err := qemuvm.Migrate(ctx(t), mon, qemuvm.Migration{URI: "unix:/x"}); err != nil {
		t.Fatal(err)
	}
	if polls != 3 {
		t.Fatalf("the state was read %d times, want until it left finish-migrate (3)", polls)
	}
}

func TestMigrationFailureSaysWhy(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Handle("migrate", func(json.RawMessage) (any, error) {
		mon.Emit("MIGRATION", map[string]string{"status": "failed"})
		return nil, nil
	})
	mon.Reply("query-migrate", map[string]string{"status": "failed", "error-desc": "Unable to write to socket: Broken pipe"})
	err := qemuvm.Migrate(ctx(t), mon, qemuvm.Migration{URI: "unix:/x"})
	if err == nil || !strings.Contains(err.Error(), "migration failed: Unable to write to socket") {
		t.Fatalf("err = %v", err)
	}

	// An incoming migration reports nothing over QMP: QEMU's log says why.
	log := filepath.Join(t.TempDir(), "qemu.log")
	os.WriteFile(log, []byte("early\nqemu-system-x86_64: Unknown savevm section type 5\nqemu-system-x86_64: load of migration failed: Invalid argument\n"), 0o600)
	mon = qemuvmtest.New()
	mon.Handle("migrate-incoming", func(json.RawMessage) (any, error) {
		mon.Emit("MIGRATION", map[string]string{"status": "failed"})
		return nil, nil
	})
	err = qemuvm.Migrate(ctx(t), mon, qemuvm.Migration{Incoming: true, URI: "fd:x", Log: log})
	if err == nil || !strings.Contains(err.Error(), "load of migration failed") {
		t.Fatalf("err = %v", err)
	}
}

func TestMigrationEndsWhenTheMachineGoes(t *testing.T) {
	mon := qemuvmtest.New()
	g, err := qemuvm.StartMigration(ctx(t), mon, qemuvm.Migration{URI: "fd:save"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mon.Hangup()
	if err := g.Wait(ctx(t)); !errors.Is(err, qemuvmtest.ErrClosed) {
		t.Fatalf("wait after the machine went: %v", err)
	}
}

func TestMigrationRefusedClosesItsSubscription(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Fail("migrate-incoming", errors.New("GenericError: The incoming migration has already been started"))
	if _, err := qemuvm.StartMigration(ctx(t), mon, qemuvm.Migration{Incoming: true, URI: "fd:x"}); err == nil {
		t.Fatal("a refused migrate-incoming started")
	}
	if n := mon.Subscribers(); n != 0 {
		t.Errorf("%d subscriptions left open", n)
	}
}

func TestParseMigrationEvent(t *testing.T) {
	if s, err := qemuvm.ParseMigrationEvent([]byte(`{"status":"completed"}`)); err != nil || s != "completed" {
		t.Fatalf("got %q, %v", s, err)
	}
	for _, bad := range []string{``, `{}`, `[]`, `{"status":1}`} {
		if _, err := qemuvm.ParseMigrationEvent([]byte(bad)); err == nil {
			t.Errorf("ParseMigrationEvent(%q) succeeded", bad)
		}
	}
}

func FuzzParseMigrationEvent(f *testing.F) {
	f.Add(`{"status":"completed"}`)
	f.Add(`{"status":"failed","error-desc":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := qemuvm.ParseMigrationEvent([]byte(s))
		if err == nil && st == "" {
			t.Fatal("no error and no status")
		}
	})
}

func TestSendInputIsOneFrame(t *testing.T) {
	mon := qemuvmtest.New()
	err := qemuvm.SendInput(ctx(t), mon, []desktop.InputEvent{
		{Kind: desktop.InputMove, X: 0, Y: 799},
		{Kind: desktop.InputButton, Button: "left", Down: true},
		{Kind: desktop.InputKey, Key: "a", Down: true},
	}, 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	cmds := mon.Commands()
	if len(cmds) != 1 || cmds[0].Name != "input-send-event" {
		t.Fatalf("commands %v", mon.Names())
	}
	want := `{"events":[{"data":{"axis":"x","value":12},"type":"abs"},{"data":{"axis":"y","value":32747},"type":"abs"},` +
		`{"data":{"button":"left","down":true},"type":"btn"},{"data":{"down":true,"key":{"data":"a","type":"qcode"}},"type":"key"}]}`
	if string(cmds[0].Args) != want {
		t.Errorf("args\n%s\nwant\n%s", cmds[0].Args, want)
	}
	// An invalid frame sends nothing.
	if err := qemuvm.SendInput(ctx(t), mon, []desktop.InputEvent{{Kind: desktop.InputMove, X: 1280}}, 1280, 800); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("move off the screen: %v", err)
	}
	if n := len(mon.Commands()); n != 1 {
		t.Errorf("%d commands after an invalid frame", n)
	}
}

func TestInputEventsRefusesWhatQEMUWouldNot(t *testing.T) {
	for _, bad := range []desktop.InputEvent{
		{Kind: desktop.InputMove, X: 1280, Y: 0},
		{Kind: desktop.InputMove, X: -1, Y: 0},
		{Kind: desktop.InputKey},
		{Kind: desktop.InputButton},
		{Kind: 99},
	} {
		if _, err := qemuvm.InputEvents([]desktop.InputEvent{bad}, 1280, 800); !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestScreendumpReadsWhatQEMUWrote(t *testing.T) {
	mon := qemuvmtest.New()
	dir := t.TempDir()
	mon.Handle("screendump", func(args json.RawMessage) (any, error) {
		var a struct{ Filename string }
		json.Unmarshal(args, &a)
		if filepath.Dir(a.Filename) != dir {
			t.Errorf("screendump into %s, want into %s", a.Filename, dir)
		}
		return nil, os.WriteFile(a.Filename, []byte("P6\n2 1\n255\n\xff\x00\x00\x00\x00\xff"), 0o600)
	})
	img, err := qemuvm.Screendump(ctx(t), mon, dir, qemuvm.Root)
	if err != nil {
		t.Fatal(err)
	}
	if img.At(1, 0) != (color.RGBA{0, 0, 255, 255}) {
		t.Errorf("pixel %v", img.At(1, 0))
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("screendump left %v", left)
	}
	mon.Fail("screendump", errors.New("GenericError: no surface"))
	if img, err := qemuvm.Screendump(ctx(t), mon, dir, qemuvm.Root); err == nil || img != nil {
		t.Errorf("failed screendump: %v, %v", img, err)
	}
}

func TestDecodePPM(t *testing.T) {
	img, err := qemuvm.DecodePPM(bytes.NewReader([]byte("P6\n# screendump\n2 1\n255\n\xff\x00\x00\x00\x00\xff")))
	if err != nil {
		t.Fatal(err)
	}
	if img.At(0, 0) != (color.RGBA{255, 0, 0, 255}) || img.At(1, 0) != (color.RGBA{0, 0, 255, 255}) {
		t.Errorf("pixels %v %v", img.At(0, 0), img.At(1, 0))
	}
	for _, bad := range []string{"P5\n1 1\n255\n\x00", "P6\n1 1\n65535\n", "P6\n100000 1\n255\n", "P6\n2 2\n255\n\x00", "P6 99999999999999999999 1 255\n"} {
		if _, err := qemuvm.DecodePPM(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzDecodePPM(f *testing.F) {
	f.Add([]byte("P6\n2 1\n255\n\xff\x00\x00\x00\x00\xff"))
	f.Add([]byte("P6\n#c\n1 1 255\n\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := qemuvm.DecodePPM(bytes.NewReader(data))
		if err == nil && img.Bounds().Dx()*img.Bounds().Dy() > 8192*8192 {
			t.Fatal("oversized picture accepted")
		}
	})
}

func TestMemoryObject(t *testing.T) {
	for _, tc := range []struct {
		mem  qemuvm.Memory
		want string
	}{
		{qemuvm.Memory{}, "memory-backend-ram,id=mem0,size=1024M"},
		{qemuvm.Memory{Path: "/s/a,b/memory"}, "memory-backend-file,id=mem0,size=1024M,mem-path=/s/a,,b/memory,share=off"},
		{qemuvm.Memory{Path: "/s/memory", Share: true}, "memory-backend-file,id=mem0,size=1024M,mem-path=/s/memory,share=on"},
	} {
		if got := qemuvm.MemoryObject(tc.mem, 1024); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.mem, got, tc.want)
		}
	}
	if got := qemuvm.Netdev("/run/a,b/nic.sock"); got != "stream,id=hostnet0,server=on,addr.type=unix,addr.path=/run/a,,b/nic.sock" {
		t.Errorf("netdev: %s", got)
	}
}

// The device list names its backends by the fixed ids: a change to either
// alone would make every snapshot unrestorable.
func TestDevicesReferToTheFixedIDs(t *testing.T) {
	all := strings.Join(qemuvm.DeviceArgs(1280, 800), "|")
	for _, ref := range []string{"chardev=" + qemuvm.AgentCharID, "drive=" + qemuvm.DiskNodeID, "netdev=" + qemuvm.NetdevID,
		"chardev=" + qemuvm.SerialCharID, "mac=" + qemuvm.GuestMAC, "name=" + qemuvm.AgentPortName, "xres=1280,yres=800", "vmgenid"} {
		if !strings.Contains(all, ref) {
			t.Errorf("device list lacks %s: %s", ref, all)
		}
	}
}

func TestVideoMemoryHoldsTwoFrames(t *testing.T) {
	for _, c := range []struct{ w, h, mib int }{
		{640, 480, 4}, {1024, 768, 8}, {1280, 800, 8}, {1280, 1024, 16}, {1600, 1200, 16}, {1920, 1080, 16}, {1920, 1200, 32}, {3840, 2160, 64},
	} {
		got := qemuvm.VideoMemoryMiB(c.w, c.h)
		if got != c.mib || got&(got-1) != 0 || got<<20 < 2*c.w*c.h*4 {
			t.Errorf("%dx%d: %d MiB, want %d (a power of two holding two 32-bit frames)", c.w, c.h, got, c.mib)
		}
	}
	if all := strings.Join(qemuvm.DeviceArgs(1280, 800), "|"); !strings.Contains(all, "VGA,id=video0,vgamem_mb=8,") {
		t.Errorf("device list's VGA: %s", all)
	}
}

func TestOverlayNames(t *testing.T) {
	for in, want := range map[string]string{
		"/d/disk-0.qcow2":   "/d/disk-1.qcow2",
		"/d/disk-9.qcow2":   "/d/disk-10.qcow2",
		"/d/disk.qcow2":     "/d/disk-0.qcow2",
		"/d/blank.qcow2":    "/d/disk-0.qcow2",
		"/d/disk-x.qcow2":   "/d/disk-0.qcow2",
		"/d/x/disk-3.qcow2": "/d/x/disk-4.qcow2",
	} {
		if got := qemuvm.NextOverlayPath(in); got != want {
			t.Errorf("NextOverlayPath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestChangeBackingFile(t *testing.T) {
	mon := qemuvmtest.New()
	if err := qemuvm.ChangeBackingFile(ctx(t), mon, "disk1", "/snap/s/disk.qcow2"); err != nil {
		t.Fatal(err)
	}
	c := mon.Commands()[0]
	if c.Name != "change-backing-file" || string(c.Args) != `{"backing-file":"/snap/s/disk.qcow2","device":"disk1","image-node-name":"disk1"}` {
		t.Errorf("%s %s", c.Name, c.Args)
	}
}

// The active disk is found by the device, not by a file name: after
// change-backing-file QEMU names the top image with a json: pseudo-name.
func TestActiveDisk(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Reply("query-block", json.RawMessage(`[
		{"device":"","qdev":"/machine/peripheral/virtio-disk0/virtio-backend","inserted":{"node-name":"libvirt-4-format","drv":"qcow2",
		 "file":"json:{\"backing\": {\"driver\": \"qcow2\"}, \"driver\": \"qcow2\", \"file\": {\"driver\": \"file\", \"filename\": \"/d/disk-1.qcow2\"}}",
		 "image":{"virtual-size":4294967296}}},
		{"device":"","qdev":"/machine/peripheral/other/virtio-backend"}]`))
	n, err := qemuvm.ActiveDisk(ctx(t), mon)
	if err != nil {
		t.Fatal(err)
	}
	if n.NodeName != "libvirt-4-format" || n.Image.VirtualSize != 4<<30 {
		t.Errorf("node %+v", n)
	}
	mon.Reply("query-block", json.RawMessage(`[{"device":"","qdev":"virtio-disk0","inserted":{"node-name":"disk1","drv":"qcow2","file":"/d/disk-1.qcow2"}}]`))
	if n, err := qemuvm.ActiveDisk(ctx(t), mon); err != nil || n.NodeName != "disk1" {
		t.Errorf("by id: %+v, %v", n, err)
	}
	mon.Reply("query-block", json.RawMessage(`[{"device":"","qdev":"/machine/peripheral/virtio-disk0/virtio-backend"}]`))
	if _, err := qemuvm.ActiveDisk(ctx(t), mon); err == nil {
		t.Error("found a disk in an empty drive")
	}
}

func TestStatus(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Reply("query-status", map[string]any{"status": "inmigrate", "running": false})
	if st, err := qemuvm.Status(ctx(t), mon); err != nil || st != "inmigrate" {
		t.Errorf("status %q, %v", st, err)
	}
}

func TestDirs(t *testing.T) {
	run, data := t.TempDir(), t.TempDir()
	d, err := qemuvm.MakeDirs(run, data, "d-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Path("vnc.sock") != filepath.Join(run, "d-1", "vnc.sock") || d.Path("disk-0.qcow2") != filepath.Join(data, "d-1", "disk-0.qcow2") {
		t.Errorf("paths %s %s", d.Path("vnc.sock"), d.Path("disk-0.qcow2"))
	}
	for _, dir := range []string{d.RunDir, d.DataDir} {
		if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", dir, info, err)
		}
	}
	// A second machine of the same id fails and leaves the first alone.
	if _, err := qemuvm.MakeDirs(run, data, "d-1"); err == nil {
		t.Error("made the directories of d-1 twice")
	}
	os.WriteFile(d.Path("disk-0.qcow2"), []byte("x"), 0o600)
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{d.RunDir, d.DataDir} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s remains: %v", dir, err)
		}
	}
	// A record with only some directories (a hibernated machine's) is fine.
	if err := (qemuvm.Dirs{DataDir: filepath.Join(data, "gone")}).Remove(); err != nil {
		t.Error(err)
	}
}

func TestSnapshotRoom(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	freeMiB := int(int64(st.Bavail) * st.Bsize >> 20)
	if err := qemuvm.SnapshotRoom(dir, 1); err != nil && freeMiB > 100 {
		t.Errorf("1 MiB of RAM with %d MiB free: %v", freeMiB, err)
	}
	if err := qemuvm.SnapshotRoom(dir, freeMiB+1); !errors.Is(err, desktop.ErrCapacity) {
		t.Errorf("more RAM than the filesystem holds: %v, want ErrCapacity", err)
	}
}

func TestFreezeLayerLinks(t *testing.T) {
	dir := t.TempDir()
	disk, snap := filepath.Join(dir, "disk-0.qcow2"), filepath.Join(dir, "snap.qcow2")
	os.WriteFile(disk, []byte("layer"), 0o600)
	if err := qemuvm.FreezeLayer(disk, snap); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(disk)
	b, _ := os.Stat(snap)
	if !os.SameFile(a, b) {
		t.Error("the frozen layer is not a hard link on the same filesystem")
	}
	if err := qemuvm.FreezeLayer(disk, snap); err == nil {
		t.Error("froze over an existing file")
	}
}

func TestCopySparseKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	f, _ := os.Create(src)
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("tail"), 64<<20)
	f.Close()
	if err := qemuvm.CopySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	want, _ := os.ReadFile(src)
	if !bytes.Equal(got, want) {
		t.Fatal("copy differs")
	}
	var st syscall.Stat_t
	syscall.Stat(dst, &st)
	if st.Blocks*512 > 1<<20 {
		t.Errorf("the copy of a 64 MiB sparse file uses %d bytes", st.Blocks*512)
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	os.WriteFile(path, []byte(b.String()), 0o600)
	if got := qemuvm.LogTail(path, 2); got != "line 9998\nline 9999" {
		t.Errorf("tail %q", got)
	}
	if got := qemuvm.LogTail(filepath.Join(t.TempDir(), "none"), 2); got != "" {
		t.Errorf("tail of nothing %q", got)
	}
}

func TestWatchConsole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("booting\r\nwarmdesk: rea"))
		c.Write([]byte("dy\n" + strings.Repeat("x", 5000)))
		c.Close()
	}()
	lines := make(chan string, 10)
	done := make(chan struct{})
	defer close(done)
	logPath := filepath.Join(t.TempDir(), "console.log")
	if err := qemuvm.WatchConsole(ctx(t), path, logPath, done, func(s string) { lines <- s }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"booting", "warmdesk: ready"} {
		select {
		case got := <-lines:
			if got != want {
				t.Errorf("line %q, want %q", got, want)
			}
		case <-ctx(t).Done():
			t.Fatalf("no line %q", want)
		}
	}
	select {
	case got := <-lines:
		if len(got) != 5000 {
			t.Errorf("an endless line came as %d bytes", len(got))
		}
	case <-ctx(t).Done():
		t.Fatal("an endless line was never handed over")
	}
	if log, err := os.ReadFile(logPath); err != nil || !strings.HasPrefix(string(log), "booting\nwarmdesk: ready\n") {
		t.Errorf("console log %.40q, %v", log, err)
	}
	if err := qemuvm.WatchConsole(ctx(t), filepath.Join(t.TempDir(), "none.sock"), "", done, nil); err == nil {
		t.Error("watched a console that is not there")
	}
}

func TestRefuseSnapshotSaysHowToRebake(t *testing.T) {
	here := desktop.MachineShape{QEMUVersion: "7.2.22", QEMUSHA256: "a", Accel: "tcg", Type: "pc-q35-7.2", CPU: "max"}
	s := desktop.Snapshot{Name: "minimal", Manifest: &desktop.Manifest{Machine: here, Image: desktop.ImageRef{Name: "minimal"}}}
	if err := qemuvm.RefuseSnapshot(s, here); err != nil {
		t.Fatalf("same shape refused: %v", err)
	}
	err := qemuvm.RefuseSnapshot(s, here, "device list differs")
	if !errors.Is(err, desktop.ErrMismatch) || !strings.Contains(err.Error(), "device list differs") || !strings.Contains(err.Error(), "hostd snapshot bake --image minimal --name minimal") {
		t.Errorf("err = %v", err)
	}
}

func TestBakeShape(t *testing.T) {
	host := desktop.MachineShape{QEMUVersion: "7.2.22", QEMUSHA256: "a", Accel: "tcg", Type: "pc-q35-7.2", CPU: "max"}
	s := qemuvm.BakeShape(host, desktop.BootSpec{CPUs: 2, MemoryMiB: 1024, Image: desktop.BootImage{Width: 1024, Height: 768, Kernel: "/k"}})
	if s.QEMUVersion != "7.2.22" || s.Accel != "tcg" || s.CPUs != 2 || s.MemoryMiB != 1024 || s.Width != 1024 || s.Height != 768 {
		t.Errorf("shape %+v", s)
	}
	if !slices.Equal(s.Devices, qemuvm.DeviceArgs(1024, 768)) {
		t.Errorf("devices %v", s.Devices)
	}
	if len(s.Mismatch(s)) != 0 {
		t.Errorf("a bake's shape mismatches itself: %v", s.Mismatch(s))
	}
}

func TestPointTabletMakesTheTabletCurrent(t *testing.T) {
	mon := qemuvmtest.New()
	mon.Reply("query-mice", []qemuvm.Mouse{
		{Name: "QEMU PS/2 Mouse", Index: 0, Current: true},
		{Name: "QEMU HID Tablet", Index: 1, Absolute: true},
	})
	mon.Reply("human-monitor-command", "")
	if err := qemuvm.PointTablet(context.Background(), mon); err != nil {
		t.Fatal(err)
	}
	cmds := mon.Commands()
	if len(cmds) != 2 || cmds[1].Name != "human-monitor-command" || !strings.Contains(string(cmds[1].Args), `"mouse_set 1"`) {
		t.Fatalf("commands %+v, want query-mice then mouse_set 1", cmds)
	}

	// Already current: nothing to do.
	mon = qemuvmtest.New()
	mon.Reply("query-mice", []qemuvm.Mouse{{Name: "QEMU HID Tablet", Index: 1, Absolute: true, Current: true}, {Name: "QEMU PS/2 Mouse"}})
	if err := qemuvm.PointTablet(context.Background(), mon); err != nil || len(mon.Commands()) != 1 {
		t.Errorf("tablet already current: %v, commands %v", err, mon.Names())
	}

	// No tablet: a device list this driver did not make.
	mon = qemuvmtest.New()
	mon.Reply("query-mice", []qemuvm.Mouse{{Name: "QEMU PS/2 Mouse", Current: true}})
	if err := qemuvm.PointTablet(context.Background(), mon); !errors.Is(err, desktop.ErrMismatch) {
		t.Errorf("no tablet: %v", err)
	}
}

// A console log about to pass its bound moves to NAME.1 and starts again;
// the two files together never hold more than twice the bound.
func TestCappedLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	l, err := qemuvm.OpenCappedLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		l.WriteLine(fmt.Sprintf("line %02d", i)) // 8 bytes each
	}
	l.WriteLine(strings.Repeat("y", 500))
	l.WriteLine("last")
	l.Close()
	cur, err := os.ReadFile(path)
	if err != nil || string(cur) != "last\n" && !strings.HasSuffix(string(cur), "last\n") {
		t.Fatalf("current log %q, %v", cur, err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil || len(old) > 100 || len(cur) > 100 {
		t.Fatalf("rotated %d bytes (%v), current %d: want each at most 100", len(old), err, len(cur))
	}
	if len(old) != 100 || strings.Count(string(old), "y") != 99 {
		t.Fatalf("an overlong line is cut to the bound: %q", old)
	}
}

// A migration that outlived its hostd is cancelled, and the call returns
// only once QEMU says it ended: a guest resumed before would be stopped
// again by the migration's completion.
func TestInterruptedMigrationIsCancelledBeforeTheGuestResumes(t *testing.T) {
	mon := qemuvmtest.New()
	// Under way, then cancelling for a read after the cancel, then ended.
	statuses := []string{"active", "cancelling", "cancelled"}
	cancelled := false
	mon.Handle("query-migrate", func(json.RawMessage) (any, error) {
		st := statuses[0]
		if cancelled && len(statuses) > 1 {
			statuses = statuses[1:]
		}
		return map[string]string{"status": st}, nil
	})
	mon.Handle("migrate_cancel", func(json.RawMessage) (any, error) {
		cancelled = true
		mon.Emit("MIGRATION", map[string]string{"status": "cancelling"})
		return map[string]any{}, nil
	})
	mon.Reply("query-status", map[string]string{"status": "paused"})
	got, err := qemuvm.EndInterruptedMigration(ctx(t), mon)
	if err != nil || got != "cancelled" {
		t.Fatalf("ended with %q, %v; want cancelled", got, err)
	}
	if names := mon.Names(); !slices.Contains(names, "migrate_cancel") {
		t.Fatalf("commands %v: the migration was not cancelled", names)
	}
	if mon.Subscribers() != 0 {
		t.Fatalf("%d subscriptions left open", mon.Subscribers())
	}

	// None under way: nothing is cancelled.
	mon = qemuvmtest.New()
	mon.Reply("query-migrate", map[string]string{"status": "completed"})
	mon.Reply("query-status", map[string]string{"status": "postmigrate"})
	if got, err := qemuvm.EndInterruptedMigration(ctx(t), mon); err != nil || got != "completed" {
		t.Fatalf("a completed migration: %q, %v", got, err)
	}
	if slices.Contains(mon.Names(), "migrate_cancel") {
		t.Fatal("a completed migration was cancelled")
	}
}
