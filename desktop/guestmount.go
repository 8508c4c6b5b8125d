// Mounting and unmounting a volume inside the guest, through the guest agent.

package desktop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/volume"
)

// unmountScript syncs and unmounts $1 when it is mounted.
const unmountScript = `dir=$1
mountpoint -q "$dir" || exit 0
sync -f "$dir"
umount "$dir" || exit 5`

// mountInGuest waits for the hot-plugged disk with serial to show in the
// guest, then mounts it on dir (made if missing), read-only when mode says
// so. It starts one process in the guest (mount), two for a read-only
// disk whose journal a crash left: under TCG each new process costs the
// guest 50 to 150 ms, where an agent file call costs a few.
func mountInGuest(ctx context.Context, a GuestAgent, serial, dir string, mode volume.Mode) error {
	ctx, cancel := context.WithTimeout(ctx, guestVolumeTimeout)
	defer cancel()
	dev, err := waitGuestDisk(ctx, a, serial)
	if err != nil {
		return err
	}
	MarkPhase(ctx, "volume_seen")
	for _, opts := range mountOptions(mode) {
		if err = guestMount(ctx, a, dev, dir, opts); err == nil {
			return nil
		}
	}
	return err
}

// guestDiskPoll spaces the checks for a hot-plugged disk: the guest's
// kernel and udev take 200 to 500 ms under TCG to show it.
const guestDiskPoll = 5 * time.Millisecond

// guestDiskPath is udev's name for the virtio disk with serial: the kernel
// names disks in the order they come, so only the serial says which is
// the volume's.
func guestDiskPath(serial string) string { return "/dev/disk/by-id/virtio-" + serial }

// waitGuestDisk waits until the disk with serial shows in the guest,
// opening its udev link through the agent (no process runs for it).
// Reading the kernel's disks in /sys/block instead, without waiting for
// udev, was measured and saved nothing: the mount then ran beside udev's
// own work on the disk, on the same virtual CPUs (docs/VOLUMES.md).
func waitGuestDisk(ctx context.Context, a GuestAgent, serial string) (string, error) {
	path := guestDiskPath(serial)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: the disk did not appear in the guest as %s within %s", ErrUnavailable, path, guestVolumeTimeout)
		case <-timer.C:
		}
		if h, err := openGuestFile(ctx, a, path, "r"); err == nil {
			if err := closeGuestFile(ctx, a, h); err != nil {
				return "", err
			}
			return path, nil
		}
		timer.Reset(guestDiskPoll)
	}
}

// mountOptions are mount's -o values to try in turn. A read-only mount of
// a filesystem whose journal a crash left falls back to skipping the
// journal (noload): the disk is read-only and cannot replay it.
// X-mount.mkdir makes the mount point, so no other process is needed.
func mountOptions(mode volume.Mode) []string {
	if mode == volume.ReadOnly {
		return []string{"ro,X-mount.mkdir", "ro,noload,X-mount.mkdir"}
	}
	return []string{"rw,noatime,X-mount.mkdir"}
}

// guestMount runs mount in the guest.
func guestMount(ctx context.Context, a GuestAgent, dev, dir, opts string) error {
	return guestRun(ctx, a, "mount", "/bin/mount", "-t", "ext4", "-o", opts, dev, dir)
}

func unmountInGuest(ctx context.Context, a GuestAgent, dir string) error {
	err := guestScript(ctx, a, "unmount", unmountScript, dir)
	var ge *guestScriptError
	if errors.As(err, &ge) && ge.code == 5 {
		return fmt.Errorf("%w: the guest still uses files under %s (%s): close them (and leave the directory) first", ErrConflict, dir, ge.msg)
	}
	return err
}

type guestScriptError struct {
	what string
	code int
	msg  string
}

func (e *guestScriptError) Error() string {
	return fmt.Sprintf("%s in the guest failed (exit %d): %s", e.what, e.code, e.msg)
}

// Unwrap: the guest did not do it; the desktop runs on.
func (e *guestScriptError) Unwrap() error { return ErrUnavailable }

func guestScript(ctx context.Context, a GuestAgent, what, script string, args ...string) error {
	return guestRun(ctx, a, what, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
}

// guestRun runs a program in the guest; a non-zero exit is a
// guestScriptError with the start of its stderr.
func guestRun(ctx context.Context, a GuestAgent, what, path string, args ...string) error {
	res, err := Exec(ctx, a, ExecRequest{Path: path, Args: args, Timeout: guestVolumeTimeout})
	if err != nil {
		return fmt.Errorf("%s in the guest: %w", what, err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return &guestScriptError{what: what, code: res.ExitCode, msg: msg}
	}
	return nil
}
