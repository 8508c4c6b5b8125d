package desktop

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/volume"
)

// mountAgent is a guest agent whose disk shows after a number of opens
// and whose mount exits with the codes given, in turn.
type mountAgent struct {
	opensBeforeDisk int
	mountExits      []int
	opened          []string
	mounts          [][]string
	exit            int
}

func (a *mountAgent) Call(_ context.Context, command string, args, result any) error {
	b, _ := json.Marshal(args)
	var req struct {
		Path string   `json:"path"`
		Arg  []string `json:"arg"`
	}
	json.Unmarshal(b, &req)
	var reply any
	switch command {
	case "guest-file-open":
		a.opened = append(a.opened, req.Path)
		if len(a.opened) <= a.opensBeforeDisk {
			return errors.New("guest agent: GenericError: No such file or directory")
		}
		reply = 7
	case "guest-file-close":
		reply = map[string]any{}
	case "guest-exec":
		if req.Path != "/bin/mount" {
			return errors.New("unexpected program " + req.Path)
		}
		a.mounts = append(a.mounts, req.Arg)
		a.exit = a.mountExits[len(a.mounts)-1]
		reply = map[string]int{"pid": 1}
	case "guest-exec-status":
		reply = map[string]any{"exited": true, "exitcode": a.exit, "err-data": base64.StdEncoding.EncodeToString([]byte("mount: wrong fs type"))}
	default:
		return errors.New("unexpected command " + command)
	}
	if result == nil {
		return nil
	}
	b, _ = json.Marshal(reply)
	return json.Unmarshal(b, result)
}

func TestMountWaitsForTheDiskAndRunsOneMount(t *testing.T) {
	a := &mountAgent{opensBeforeDisk: 3, mountExits: []int{0}}
	if err := mountInGuest(t.Context(), a, "wdvol1", "/workspace", volume.ReadWrite); err != nil {
		t.Fatal(err)
	}
	if len(a.opened) != 4 || a.opened[3] != "/dev/disk/by-id/virtio-wdvol1" {
		t.Errorf("opened %q, want the disk's udev link four times", a.opened)
	}
	want := []string{"-t", "ext4", "-o", "rw,noatime,X-mount.mkdir", "/dev/disk/by-id/virtio-wdvol1", "/workspace"}
	if len(a.mounts) != 1 || strings.Join(a.mounts[0], " ") != strings.Join(want, " ") {
		t.Errorf("mounts %q, want one: %q", a.mounts, want)
	}
}

func TestReadOnlyMountFallsBackToNoload(t *testing.T) {
	a := &mountAgent{mountExits: []int{32, 0}}
	if err := mountInGuest(t.Context(), a, "wdvol0", "/data", volume.ReadOnly); err != nil {
		t.Fatal(err)
	}
	if len(a.mounts) != 2 || a.mounts[0][3] != "ro,X-mount.mkdir" || a.mounts[1][3] != "ro,noload,X-mount.mkdir" {
		t.Errorf("mounts %q, want ro and then ro,noload", a.mounts)
	}
}

func TestFailedMountSaysWhy(t *testing.T) {
	a := &mountAgent{mountExits: []int{32}}
	err := mountInGuest(t.Context(), a, "wdvol0", "/data", volume.ReadWrite)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "exit 32") || !strings.Contains(err.Error(), "wrong fs type") {
		t.Errorf("err = %v, want ErrUnavailable with mount's exit and message", err)
	}
}

func TestMountGivesUpWhenTheDiskNeverShows(t *testing.T) {
	a := &mountAgent{opensBeforeDisk: 1 << 30}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := mountInGuest(ctx, a, "wdvol2", "/data", volume.ReadWrite)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "virtio-wdvol2") || len(a.mounts) != 0 {
		t.Errorf("err = %v after %d mounts, want ErrUnavailable naming the disk and no mount", err, len(a.mounts))
	}
}

func TestExecPollsBrisklyAtFirst(t *testing.T) {
	wait, elapsed := execPollStart, time.Duration(0)
	for elapsed < execBrisk {
		wait = nextExecPoll(wait, elapsed)
		elapsed += wait
		if wait > execPollBrisk {
			t.Fatalf("a poll %s apart after %s, want at most %s during the first %s", wait, elapsed, execPollBrisk, execBrisk)
		}
	}
	for range 10 {
		wait = nextExecPoll(wait, elapsed)
	}
	if wait != execPollMax {
		t.Errorf("after %s polls are %s apart, want %s", elapsed, wait, execPollMax)
	}
}
