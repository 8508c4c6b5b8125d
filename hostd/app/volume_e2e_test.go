package app_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// guestShell runs a shell line in a desktop and returns its output and
// exit code.
func guestShell(t *testing.T, h *host, id, line string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.c.Exec(ctx, id, api.ExecRequest{Shell: line, Timeout: api.Duration(90 * time.Second)})
	if err != nil {
		t.Fatalf("exec %q on %s: %v", line, id, err)
	}
	return strings.TrimSpace(res.Stdout + res.Stderr), res.ExitCode
}

// mustShell runs a line that must succeed and returns its output.
func mustShell(t *testing.T, h *host, id, line string) string {
	t.Helper()
	out, code := guestShell(t, h, id, line)
	if code != 0 {
		t.Fatalf("%q on %s exited %d: %s", line, id, code, out)
	}
	return out
}

// wantStatus checks that err is an API error with the given status whose
// message names each of names.
func wantStatus(t *testing.T, what string, err error, status int, names ...string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status {
		t.Fatalf("%s: got %v, want HTTP %d", what, err, status)
	}
	for _, n := range names {
		if !strings.Contains(ce.Message, n) {
			t.Errorf("%s: %q does not name %s", what, ce.Message, n)
		}
	}
}

// TestVolumesEndToEnd is the volume workflow on each driver: a
// file written in a volume outlives its desktop and is read in the next;
// one writer, many readers; hibernate, wake and a restart of hostd keep it
// attached; a full volume is ENOSPC in the guest and bounded on the host.
func TestVolumesEndToEnd(t *testing.T) { testVolumes(t, "qemu") }

func TestVolumesEndToEndLibvirt(t *testing.T) { testVolumes(t, "libvirt") }

func testVolumes(t *testing.T, driver string) {
	cfg, snap := hostConfig(t, driver, "minimal")
	if driver == "libvirt" {
		// libvirt hot-plugs a volume's layers by name, which a desktop's
		// own user id may not open (desktop/libvirt/volume.go).
		cfg.QEMUUIDs = "off"
	}
	h := openHost(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var made []string
	// Registered after each openHost, so it runs before that host closes
	// (cleanups run last first).
	deleteMade := func() {
		for _, id := range made {
			if h.srv != nil {
				h.c.DeleteDesktop(context.Background(), id)
			}
		}
	}
	t.Cleanup(deleteMade)
	create := func(req api.CreateDesktop) api.Desktop {
		t.Helper()
		req.Snapshot = snap
		d, err := h.c.CreateDesktop(ctx, req)
		if err != nil {
			t.Fatalf("create %+v: %v", req.Volumes, err)
		}
		made = append(made, d.ID)
		return d
	}
	if _, err := h.c.CreateVolume(ctx, api.CreateVolume{Name: "ws", SizeMiB: 64}); err != nil {
		t.Fatal(err)
	}
	_, err := h.c.CreateVolume(ctx, api.CreateVolume{Name: "ws", SizeMiB: 64})
	wantStatus(t, "a second volume ws", err, http.StatusConflict, "ws")
	_, err = h.c.CreateVolume(ctx, api.CreateVolume{Name: "Bad Name", SizeMiB: 64})
	wantStatus(t, "a bad name", err, http.StatusBadRequest, "volume name")
	_, err = h.c.CreateVolume(ctx, api.CreateVolume{Name: "huge", SizeMiB: 1 << 30})
	wantStatus(t, "a size out of range", err, http.StatusBadRequest, "size_mib")

	// A writes, and goes.
	a := create(api.CreateDesktop{Volumes: []api.VolumeMount{{Name: "ws", Mount: "/workspace"}}})
	if len(a.Volumes) != 1 || a.Volumes[0].Mode != "rw" {
		t.Fatalf("A's volumes: %+v", a.Volumes)
	}
	mustShell(t, h, a.ID, "echo from-A > /workspace/notes.txt")
	_, err = h.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: snap, Volumes: []api.VolumeMount{{Name: "ws", Mount: "/w"}}})
	wantStatus(t, "a second writer at create", err, http.StatusConflict, a.ID)
	if err := h.c.DeleteDesktop(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if v, err := h.c.Volume(ctx, "ws"); err != nil || len(v.AttachedTo) != 0 {
		t.Fatalf("after A's delete ws is %+v, %v", v, err)
	}

	// B attaches it while running, and reads A's file.
	b := create(api.CreateDesktop{})
	_, err = h.c.AttachVolume(ctx, b.ID, api.VolumeMount{Name: "ws", Mount: "/etc/ws"})
	wantStatus(t, "a mount on a system directory", err, http.StatusBadRequest, "/etc")
	_, err = h.c.AttachVolume(ctx, b.ID, api.VolumeMount{Name: "nope", Mount: "/data"})
	wantStatus(t, "an unknown volume", err, http.StatusNotFound, "nope")
	if _, err := h.c.AttachVolume(ctx, b.ID, api.VolumeMount{Name: "ws", Mount: "/data"}); err != nil {
		t.Fatal(err)
	}
	if got := mustShell(t, h, b.ID, "cat /data/notes.txt"); got != "from-A" {
		t.Fatalf("B read %q from the volume, want from-A", got)
	}
	err = h.c.RemoveVolume(ctx, "ws")
	wantStatus(t, "removing an attached volume", err, http.StatusConflict, b.ID)
	_, err = h.c.Snapshot(ctx, b.ID, "with-volume")
	wantStatus(t, "a kept snapshot of a desktop holding a volume", err, http.StatusConflict, "detach")

	// A fork branches the volume: each copy writes its own branch, and B's
	// stays as it was.
	if driver == "libvirt" {
		_, err = h.c.Fork(ctx, b.ID, 2)
		wantStatus(t, "a fork with a volume on libvirt", err, http.StatusBadRequest, "does not branch volumes")
	} else {
		copies, err := h.c.Fork(ctx, b.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range copies {
			made = append(made, c.ID)
			if len(c.Volumes) != 1 || c.Volumes[0].Name != "ws-"+c.ID || c.Volumes[0].Mount != "/data" {
				t.Fatalf("copy %s has volumes %+v, want its branch ws-%s at /data", c.ID, c.Volumes, c.ID)
			}
			line := "copy" + string(rune('1'+i))
			if got := mustShell(t, h, c.ID, "echo "+line+" >> /data/notes.txt && cat /data/notes.txt"); got != "from-A\n"+line {
				t.Errorf("copy %s reads %q after its write", c.ID, got)
			}
		}
		if got := mustShell(t, h, b.ID, "cat /data/notes.txt"); got != "from-A" {
			t.Errorf("the copies' writes reached B: %q", got)
		}
		for _, c := range copies {
			if err := h.c.DeleteDesktop(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			br, err := h.c.Volume(ctx, "ws-"+c.ID)
			if err != nil || len(br.AttachedTo) != 0 || br.BranchOf != "ws" {
				t.Fatalf("branch of %s after its delete: %+v, %v", c.ID, br, err)
			}
			if err := h.c.RemoveVolume(ctx, "ws-"+c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Hibernate and wake keep it mounted.
	if _, err := h.c.Op(ctx, b.ID, "hibernate"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Op(ctx, b.ID, "wake"); err != nil {
		t.Fatal(err)
	}
	mustShell(t, h, b.ID, "echo after-wake >> /data/notes.txt")

	// A restart of hostd finds B with its volume, still writable.
	h.close()
	h = openHost(t, cfg)
	t.Cleanup(deleteMade)
	if d, err := h.c.Desktop(ctx, b.ID); err != nil || len(d.Volumes) != 1 || d.State != "running" {
		t.Fatalf("after a restart B is %+v, %v", d, err)
	}
	if got := mustShell(t, h, b.ID, "echo after-restart >> /data/notes.txt && cat /data/notes.txt"); got != "from-A\nafter-wake\nafter-restart" {
		t.Fatalf("after a restart B reads %q", got)
	}

	// A full volume: ENOSPC in the guest, and its file bounded on the host.
	if _, err := h.c.CreateVolume(ctx, api.CreateVolume{Name: "tiny", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.AttachVolume(ctx, b.ID, api.VolumeMount{Name: "tiny", Mount: "/tiny"}); err != nil {
		t.Fatal(err)
	}
	out, code := guestShell(t, h, b.ID, "dd if=/dev/urandom of=/tiny/fill bs=1M count=32 2>&1; sync")
	if code == 0 && !strings.Contains(out, "No space left on device") {
		t.Fatalf("32 MiB into a 16 MiB volume: %s", out)
	}
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("the guest did not see ENOSPC: %s", out)
	}
	tiny, err := h.c.Volume(ctx, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	// qcow2's own metadata for 16 MiB is well under 1 MiB.
	if tiny.AllocatedBytes > 17<<20 {
		t.Errorf("a full 16 MiB volume takes %d bytes on the host", tiny.AllocatedBytes)
	}
	if _, err := h.c.DetachVolume(ctx, b.ID, "tiny"); err != nil {
		t.Fatal(err)
	}
	if out, _ := guestShell(t, h, b.ID, "ls /sys/block"); strings.Count(out, "vd") != 2 {
		t.Errorf("after detaching tiny the guest has disks %q, want vda and one volume", out)
	}

	// Readers: B lets go, then B, C and D read it at once; no writer
	// meanwhile.
	if _, err := h.c.DetachVolume(ctx, b.ID, "ws"); err != nil {
		t.Fatal(err)
	}
	ro := []api.VolumeMount{{Name: "ws", Mount: "/ws", Mode: "ro"}}
	if _, err := h.c.AttachVolume(ctx, b.ID, ro[0]); err != nil {
		t.Fatal(err)
	}
	c := create(api.CreateDesktop{Volumes: ro})
	d := create(api.CreateDesktop{Volumes: ro})
	for _, id := range []string{b.ID, c.ID, d.ID} {
		if got := mustShell(t, h, id, "head -1 /ws/notes.txt"); got != "from-A" {
			t.Errorf("%s read %q", id, got)
		}
	}
	if _, code := guestShell(t, h, c.ID, "touch /ws/x"); code == 0 {
		t.Error("a read-only volume took a write")
	}
	if driver == "qemu" {
		// A fork shares a read-only volume with its copy.
		copies, err := h.c.Fork(ctx, c.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, copies[0].ID)
		if got := mustShell(t, h, copies[0].ID, "head -1 /ws/notes.txt"); got != "from-A" {
			t.Errorf("the copy of a reader reads %q", got)
		}
		if err := h.c.DeleteDesktop(ctx, copies[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err = h.c.AttachVolume(ctx, c.ID, api.VolumeMount{Name: "tiny", Mount: "/ws/t"})
	wantStatus(t, "a mount inside another", err, http.StatusBadRequest, "/ws")
	e := create(api.CreateDesktop{})
	_, err = h.c.AttachVolume(ctx, e.ID, api.VolumeMount{Name: "ws", Mount: "/ws"})
	wantStatus(t, "a writer beside readers", err, http.StatusConflict, b.ID, c.ID, d.ID)

	// Out: a volume snapshot and its archive hold the files.
	for _, id := range []string{b.ID, c.ID, d.ID, e.ID} {
		if err := h.c.DeleteDesktop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.c.FreezeVolume(ctx, "ws", "ws-v1"); err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if _, err := h.c.ExportVolume(ctx, "ws-v1", &tarball); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tarball.Bytes(), []byte("from-A\nafter-wake\nafter-restart")) {
		t.Errorf("the archive of ws-v1 lacks notes.txt's content (%d bytes)", tarball.Len())
	}
	if _, err := os.Stat(cfg.Volumes()); err != nil {
		t.Fatal(err)
	}
	testenv.Logger(t).Info("volume archive", "bytes", tarball.Len())
}
