package libvirt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/hostd/settle"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// device is one -device argument as a driver name and its properties.
type device struct {
	Driver string
	Props  map[string]string
}

func (d device) String() string {
	keys := make([]string, 0, len(d.Props))
	for k := range d.Props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(d.Driver)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%s", k, d.Props[k])
	}
	return b.String()
}

// parseDevice reads a -device argument in either syntax: QEMU's
// driver,key=value (the QEMU driver's) or JSON (libvirt's).
func parseDevice(t *testing.T, arg string) device {
	t.Helper()
	d := device{Props: map[string]string{}}
	if strings.HasPrefix(arg, "{") {
		var m map[string]any
		if err := json.Unmarshal([]byte(arg), &m); err != nil {
			t.Fatalf("device %s: %v", arg, err)
		}
		for k, v := range m {
			if k == "driver" {
				d.Driver = fmt.Sprint(v)
				continue
			}
			d.Props[k] = fmt.Sprint(v)
		}
		return d
	}
	parts := strings.Split(arg, ",")
	d.Driver = parts[0]
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		d.Props[k] = v
	}
	return d
}

// normalise drops what may differ between the drivers without changing
// the machine or its saved state: the block node a disk device is attached
// to (libvirt names its own nodes), libvirt's boot order and vmgenid guid
// (a new generation id per process is the point of vmgenid), and the
// serial port's index (0, QEMU's default for the first one).
func normalise(d device) device {
	out := device{Driver: d.Driver, Props: map[string]string{}}
	for k, v := range d.Props {
		switch {
		case k == "drive" && d.Driver == "virtio-blk-pci":
			v = "(disk)"
		case k == "bootindex", k == "guid" && d.Driver == "vmgenid", k == "index" && d.Driver == "isa-serial" && v == "0":
			continue
		}
		out.Props[k] = v
	}
	return out
}

func devicesOf(t *testing.T, args []string) []string {
	t.Helper()
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-device" {
			out = append(out, normalise(parseDevice(t, args[i+1])).String())
		}
	}
	slices.Sort(out)
	return out
}

// TestLibvirtStartsTheQEMUDriversMachine reads the command line of the
// QEMU libvirt started for a clone and checks
// that its devices are exactly the snapshot's, the devices the QEMU driver
// starts: the condition for a snapshot to restore on both drivers.
func TestLibvirtStartsTheQEMUDriversMachine(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	drv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer drv.Close()
	want := devicesOf(t, append([]string{}, func() []string {
		var a []string
		for _, d := range baked.Snapshot.Manifest.Machine.Devices {
			a = append(a, "-device", d)
		}
		return a
	}()...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("dev-"), Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if got := devicesOf(t, args); !slices.Equal(got, want) {
		t.Errorf("libvirt's QEMU has devices\n  %s\nthe snapshot has\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	joined := strings.Join(args, " ")
	// A desktop that runs as its own id (hostd as root) listens for its
	// state from its start; otherwise it waits for migrate-incoming.
	incoming := "-incoming defer"
	if os.Geteuid() == 0 {
		incoming = "-incoming unix:"
	}
	for _, must := range []string{"-machine memory-backend=mem0", "share=off", incoming, "-cpu max", "cores=2"} {
		if !strings.Contains(joined, must) {
			t.Errorf("command line lacks %q", must)
		}
	}
	if !strings.Contains(joined, "-netdev stream,id=hostnet0,server=on,addr.type=unix") {
		t.Errorf("the NIC's backend is not the egress stream: %s", joined)
	}
}

// TestSnapshotsRestoreAcrossDrivers snapshots a running desktop on one
// driver and restores the snapshot on the other, both ways. (The
// conformance suite already restores, on libvirt, the snapshot the QEMU
// driver baked.)
func TestSnapshotsRestoreAcrossDrivers(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	lv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer lv.Close()
	qd, err := qemu.New(context.Background(), qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer qd.Close()
	if !reflect.DeepEqual(lv.Shape(), qd.Shape()) {
		t.Fatalf("the drivers describe this host differently:\nlibvirt %+v\nqemu    %+v", lv.Shape(), qd.Shape())
	}
	for _, c := range []struct {
		name     string
		from, to desktop.Driver
	}{{"libvirt to qemu", lv, qd}, {"qemu to libvirt", qd, lv}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			mgr := desktop.NewManager(ctx, desktop.Config{Driver: c.from, Store: desktoptest.NewMemStore(), Catalog: baked.Catalog, Logger: testenv.Logger(t), Limits: desktop.DefaultLimits()})
			defer mgr.Close()
			src, err := mgr.Create(ctx, desktop.CreateRequest{Snapshot: baked.Snapshot.Name})
			if err != nil {
				t.Fatal(err)
			}
			name := "xdriver-" + desktop.NewID("")[:8]
			snap, err := mgr.Lineage().Snapshot(ctx, src.ID, name)
			if err != nil {
				t.Fatal(err)
			}
			defer mgr.Lineage().RemoveSnapshot(name)
			defer mgr.Delete(context.WithoutCancel(ctx), src.ID)
			if snap.Manifest.BakedBy != c.from.Name() {
				t.Errorf("snapshot baked by %q, want %q", snap.Manifest.BakedBy, c.from.Name())
			}
			m, err := c.to.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("x-"), Snapshot: snap})
			if err != nil {
				t.Fatalf("restore a %s snapshot on %s: %v", c.from.Name(), c.to.Name(), err)
			}
			defer m.Destroy(context.WithoutCancel(ctx))
			drivable(ctx, t, m)
		})
	}
}

// TestBakeOnLibvirtRestoresOnQEMU cold-boots the minimal image through
// libvirt, bakes it (console readiness, settle, template save) and
// restores the result on the QEMU driver.
func TestBakeOnLibvirtRestoresOnQEMU(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	lv := newDriver(t, testenv.RunDir(t), testenv.DataDir(t))
	defer lv.Close()
	catalog, err := desktop.NewCatalog(filepath.Join(t.TempDir(), "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	snap, err := images.Bake(ctx, images.BakeOptions{
		Driver: lv, Catalog: catalog, Image: baked.Image, Name: "lvbake", Progress: testWriter{t},
		Settle: func(ctx context.Context, m desktop.Machine) error {
			_, err := settle.Machine(ctx, m, 2*time.Second, 5*time.Minute, testenv.Logger(t))
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baked on libvirt in %s", time.Since(start).Round(time.Second))
	if snap.Manifest.BakedBy != "libvirt" || !slices.Equal(snap.Manifest.Machine.Devices, qemuvm.DeviceArgs(snap.Manifest.Machine.Width, snap.Manifest.Machine.Height)) {
		t.Errorf("manifest: baked by %q, devices %q", snap.Manifest.BakedBy, snap.Manifest.Machine.Devices)
	}
	qd, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer qd.Close()
	if err := images.RestoreCheck(ctx, qd, snap); err != nil {
		t.Fatalf("a libvirt bake on the QEMU driver: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestAgentDrainIsQuick checks that the drain of a clone's agent socket
// (drain.go), which holds agent calls back, ends with the guest's answer
// and quickly, and that libvirt has the agent afterwards.
func TestAgentDrainIsQuick(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	newDriver(t, testenv.RunDir(t), testenv.DataDir(t)).Close() // skips without libvirtd
	drained := &records{msg: "guest agent drained", next: testenv.Logger(t).Handler()}
	testenv.UsesLibvirtd(t)
	lv, err := libvirt.New(context.Background(), libvirt.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: slog.New(drained)})
	if err != nil {
		t.Fatal(err)
	}
	defer lv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := lv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("drain-"), Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	start := time.Now()
	if err := m.Agent().Call(ctx, "guest-ping", nil, nil); err != nil {
		t.Fatalf("guest-ping through libvirt after the drain: %v", err)
	}
	t.Logf("first agent call %s after the restore", time.Since(start).Round(time.Millisecond))
	took := time.Duration(drained.int("took"))
	if took <= 0 {
		t.Fatal("the agent socket was not drained (no record of it)")
	}
	if took > 2*time.Second {
		t.Errorf("the drain took %s", took)
	}
}

// records passes log records on and keeps the attributes of the last one
// with a given message, whatever its level.
type records struct {
	msg  string
	next slog.Handler
	mu   sync.Mutex
	last map[string]slog.Value
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Message == r.msg {
		r.mu.Lock()
		r.last = map[string]slog.Value{}
		rec.Attrs(func(a slog.Attr) bool { r.last[a.Key] = a.Value; return true })
		r.mu.Unlock()
	}
	if r.next.Enabled(ctx, rec.Level) {
		return r.next.Handle(ctx, rec)
	}
	return nil
}

func (r *records) int(key string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.last[key]
	switch {
	case !ok:
		return -1
	case v.Kind() == slog.KindDuration:
		return int64(v.Duration())
	case v.Kind() == slog.KindInt64:
		return v.Int64()
	}
	return -1
}
