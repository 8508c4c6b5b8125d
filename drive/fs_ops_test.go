package drive_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
)

func TestFileOperationsRunAsTheUserAndSayWhyTheyWereRefused(t *testing.T) {
	h := newHarness(t, drive.Config{})
	ctx := context.Background()
	var got desktoptest.GuestCmd
	h.guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		got = c
		switch c.Args[len(c.Args)-1] {
		case "/gone":
			return desktoptest.GuestResult{ExitCode: 2}, nil
		case "/denied":
			return desktoptest.GuestResult{ExitCode: 1, Stderr: []byte("rm: cannot remove '/denied': Permission denied\n")}, nil
		}
		return desktoptest.GuestResult{Stdout: []byte("d\x004096\x00755\x00drwxr-xr-x\x00user\x00user\x001700000000\x00\x00/home/user/d\x00")}, nil
	}
	user := drive.GuestUser{UID: "1000", GID: "1001"}
	e, err := h.svc.MakeDir(ctx, h.id, user, "/home/user/d")
	if err != nil || e.Type != drive.FileDir || e.Name != "d" || e.Owner != "user" {
		t.Fatalf("make: %+v %v", e, err)
	}
	if strings.Join(got.Args[:6], " ") != "--reuid=1000 --regid=1001 --init-groups -- /bin/sh -c" || got.Path != "setpriv" {
		t.Errorf("ran %s %q, not as the user", got.Path, got.Args)
	}
	if _, err := h.svc.Stat(ctx, h.id, drive.GuestUser{}, "/home/user/d"); err != nil || got.Path != "/bin/sh" {
		t.Errorf("root's stat: %v, ran %s", err, got.Path)
	}
	err = h.svc.Remove(ctx, h.id, user, "/gone")
	if !errors.Is(err, drive.ErrNotExist) || !errors.Is(err, desktop.ErrNotFound) || err.Error() != "/gone does not exist" {
		t.Errorf("remove of nothing: %v", err)
	}
	err = h.svc.Remove(ctx, h.id, user, "/denied")
	if err == nil || errors.Is(err, drive.ErrNotExist) || !strings.Contains(err.Error(), "Permission denied (exit 1)") {
		t.Errorf("a refused remove: %v", err)
	}
	calls := len(h.guest.Calls())
	for name, err := range map[string]error{
		"relative path": h.svc.Remove(ctx, h.id, user, "notes.txt"),
		"user's ids":    h.svc.Remove(ctx, h.id, drive.GuestUser{UID: "user"}, "/tmp/x"),
		"depth":         func() error { _, err := h.svc.ListDir(ctx, h.id, user, "/tmp", drive.MaxListDepth+1); return err }(),
	} {
		if !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if n := len(h.guest.Calls()); n != calls {
		t.Errorf("refused operations reached the guest: %v", h.guest.Calls()[calls:])
	}
}
