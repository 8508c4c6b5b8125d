package libvirt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// drivable checks that a machine answers on every channel hostd uses: QMP
// passthrough (screendump, input), the guest agent, and the VNC socket.
func drivable(ctx context.Context, t *testing.T, m desktop.Machine) {
	t.Helper()
	img, err := m.Screendump(ctx)
	if err != nil {
		t.Fatalf("screendump: %v", err)
	}
	if desktop.BlankScreen(img) {
		t.Fatal("blank screen")
	}
	if err := m.SendInput(ctx, []desktop.InputEvent{{Kind: desktop.InputMove, X: 10, Y: 10}}); err != nil {
		t.Fatalf("input: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := desktop.Exec(actx, m.Agent(), desktop.ExecRequest{Path: "/bin/echo", Args: []string{"agent-ok"}})
	if err != nil {
		t.Fatalf("guest agent: %v", err)
	}
	if strings.TrimSpace(string(res.Stdout)) != "agent-ok" {
		t.Fatalf("guest agent exec printed %q", res.Stdout)
	}
	c, err := m.DialVNC(ctx)
	if err != nil {
		t.Fatalf("vnc: %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	banner := make([]byte, 12)
	if _, err := c.Read(banner); err != nil || !strings.HasPrefix(string(banner), "RFB ") {
		t.Fatalf("vnc banner %q: %v", banner, err)
	}
}

// TestLibvirtdRestartKeepsDesktops restarts libvirtd under running and
// paused desktops: after the driver reconnects each is still listed, in
// its state, and drivable, and events flow again (a desktop killed
// afterwards is noticed).
func TestLibvirtdRestartKeepsDesktops(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	script := "../../scripts/libvirtd"
	if out, err := exec.Command(script, "--status").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("libvirtd was not started by scripts/libvirtd, so this test will not restart it: %s", strings.TrimSpace(string(out)))
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mgr := desktop.NewManager(ctx, desktop.Config{Driver: drv, Store: desktoptest.NewMemStore(), Catalog: baked.Catalog, Logger: testenv.Logger(t), Limits: desktop.DefaultLimits()})
	defer mgr.Close()
	var ids []string
	for range 2 {
		d, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
		defer mgr.Delete(context.Background(), d.ID)
	}
	if _, err := mgr.Pause(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	var machines []desktop.Machine
	for _, id := range ids {
		m, _, err := mgr.Machine(ctx, id, desktop.WaitNone)
		if err != nil {
			t.Fatal(err)
		}
		machines = append(machines, m)
	}

	// Other packages' libvirt tests run side by side with this one: the
	// restart waits for them to end, and they wait for it.
	release := testenv.RestartsLibvirtd(t)
	start := time.Now()
	out, err := exec.Command(script, "--restart").CombinedOutput()
	release()
	if err != nil {
		t.Fatalf("restart libvirtd: %v: %s", err, out)
	}
	t.Logf("libvirtd restarted in %s", time.Since(start).Round(time.Millisecond))

	for i, m := range machines {
		select {
		case <-m.Exited():
			t.Fatalf("desktop %s ended with the libvirtd restart: %s", ids[i], m.ExitReason())
		default:
		}
	}
	if n := len(mgr.List()); n != 2 {
		t.Fatalf("%d desktops listed after the restart, want 2", n)
	}
	if d, _ := mgr.Get(ids[1]); d.State != desktop.StatePaused {
		t.Fatalf("the paused desktop is %s after the restart", d.State)
	}
	drivable(ctx, t, machines[0])
	if _, err := mgr.Resume(ctx, ids[1]); err != nil {
		t.Fatalf("resume after the libvirtd restart: %v", err)
	}
	drivable(ctx, t, machines[1])

	// Lifecycle events arrive on the new connection.
	events, stop := mgr.Events().Subscribe()
	defer stop()
	if err := syscall.Kill(machines[0].Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Desktop.ID == ids[0] && ev.Desktop.State == desktop.StateFailed {
				return
			}
		case <-ctx.Done():
			t.Fatal("a desktop killed after the libvirtd restart was not noticed")
		}
	}
}

// foreignXML is a domain hostd did not create: no metadata, or metadata
// naming another machine.
func foreignXML(name, uuid, meta string) string {
	return `<domain type='qemu'><name>` + name + `</name><uuid>` + uuid + `</uuid>` + meta +
		`<memory unit='MiB'>32</memory><os><type arch='x86_64' machine='q35'>hvm</type></os>` +
		`<devices><memballoon model='none'/></devices></domain>`
}

// TestForeignDomainsAreNeverTouched starts domains hostd did not create
// (one without metadata, one that names another desktop, one that looks
// like a leftover template of another run directory) and checks that
// neither a new driver, nor Cleanup or Attach with records pointing at them,
// ends or claims them.
func TestForeignDomainsAreNeverTouched(t *testing.T) {
	testenv.SkipShort(t)
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer drv.Close()
	l := virt(t)
	meta := func(id, role string) string {
		return `<metadata><w:machine xmlns:w='` + libvirt.MetadataURI + `' id='` + id + `' role='` + role + `'/></metadata>`
	}
	foreign := []struct{ name, uuid, meta, recordID string }{
		{"not-warmdesk-" + desktop.NewID(""), "4f6c1a3e-0000-4000-8000-000000000001", "", "d-1"},
		{"warmdesk-d-lookalike-" + desktop.NewID(""), "4f6c1a3e-0000-4000-8000-000000000002", meta("d-someone-else", libvirt.RoleDesktop), "d-2"},
		{"warmdesk-tmpl-elsewhere-" + desktop.NewID(""), "4f6c1a3e-0000-4000-8000-000000000003", meta("tmpl-elsewhere", libvirt.RoleTemplate), "tmpl-x"},
	}
	for _, f := range foreign {
		if _, err := l.DomainCreateXML(foreignXML(f.name, f.uuid, f.meta), golibvirt.DomainStartPaused); err != nil {
			t.Fatal(err)
		}
		name := f.name
		t.Cleanup(func() {
			if d, err := l.DomainLookupByName(name); err == nil {
				l.DomainDestroy(d)
			}
		})
	}
	// A new driver sweeps leftover templates of its own run directory only.
	drv2 := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	drv2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range foreign {
		raw, _ := json.Marshal(map[string]any{"id": f.recordID, "domain": f.name, "uuid": f.uuid, "run_dir": t.TempDir(), "data_dir": t.TempDir()})
		if _, err := drv.Attach(ctx, raw); !errors.Is(err, desktop.ErrNotFound) {
			t.Errorf("attach to %s: %v, want ErrNotFound", f.name, err)
		}
		if err := drv.Cleanup(ctx, raw); err != nil {
			t.Errorf("cleanup with a record naming %s: %v", f.name, err)
		}
	}
	for _, f := range foreign {
		d, err := l.DomainLookupByName(f.name)
		if err != nil {
			t.Errorf("domain %s is gone: %v", f.name, err)
			continue
		}
		if st, _, err := l.DomainGetState(d, 0); err != nil || golibvirt.DomainState(st) != golibvirt.DomainPaused {
			t.Errorf("domain %s is in state %d (%v), want still paused", f.name, st, err)
		}
	}
}

// TestMismatchedSnapshotRefused changes a snapshot's manifest in memory and
// checks that the libvirt driver refuses it with ErrMismatch, saying what
// differs, and leaves nothing behind.
func TestMismatchedSnapshotRefused(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	runDir, dataDir := testenv.RunDir(t), testenv.DataDir(t)
	drv := newDriver(t, runDir, dataDir)
	defer drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		what, want string
		change     func(*desktop.MachineShape)
	}{
		{"another QEMU build", "QEMU build", func(s *desktop.MachineShape) { s.QEMUSHA256 = strings.Repeat("0", 64) }},
		{"another accelerator", "accelerator", func(s *desktop.MachineShape) { s.Accel = "kvm" }},
		{"another machine type", "machine type", func(s *desktop.MachineShape) { s.Type = "pc-q35-7.1" }},
		{"another device list", "device list", func(s *desktop.MachineShape) {
			s.Devices = append(append([]string(nil), s.Devices...), "virtio-rng-pci,id=rng0")
		}},
	} {
		snap := baked.Snapshot
		snap.Manifest = new(desktop.Manifest)
		*snap.Manifest = *baked.Snapshot.Manifest
		c.change(&snap.Manifest.Machine)
		_, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("mm-"), Snapshot: snap})
		if !errors.Is(err, desktop.ErrMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrMismatch naming the %s", c.what, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(runDir); len(entries) > 0 {
		t.Errorf("refused restores left %d run directories", len(entries))
	}
}
