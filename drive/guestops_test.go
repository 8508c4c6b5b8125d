package drive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
)

func TestExecRunsTheProgramWithItsEnvironment(t *testing.T) {
	h := newHarness(t, drive.Config{})
	var got desktoptest.GuestCmd
	h.guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		got = c
		return desktoptest.GuestResult{Stdout: []byte("hi\n"), ExitCode: 3}, nil
	}
	res, err := h.svc.Exec(context.Background(), h.id, drive.ExecRequest{
		Path: "/usr/bin/printf", Args: []string{"hi"}, Env: map[string]string{"B": "2", "A": "1"}, Cwd: "/tmp", Stdin: []byte("in"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "hi\n" || res.TimedOut {
		t.Errorf("result %+v", res)
	}
	if got.Path != "/usr/bin/printf" || strings.Join(got.Args, " ") != "hi" || got.Cwd != "/tmp" ||
		strings.Join(got.Env, " ") != "A=1 B=2" || string(got.Stdin) != "in" || got.Timeout != "30.000" {
		t.Errorf("the guest ran %+v", got)
	}
}

func TestExecRefusesBadRequestsNamingTheField(t *testing.T) {
	h := newHarness(t, drive.Config{})
	before := len(h.guest.Calls()) // the Manager's own, at create
	for field, req := range map[string]drive.ExecRequest{
		"cmd":        {},
		"cwd":        {Path: "ls", Cwd: "relative"},
		"env.1X":     {Path: "ls", Env: map[string]string{"1X": "v"}},
		"timeout":    {Path: "ls", Timeout: time.Hour},
		"max_output": {Path: "ls", MaxOutput: -1},
		"args[1]":    {Path: "ls", Args: []string{"a", "b\x00"}},
	} {
		_, err := h.svc.Exec(context.Background(), h.id, req)
		var fe interface{ FieldName() string }
		if !errors.As(err, &fe) || fe.FieldName() != field || !errors.Is(err, desktop.ErrInvalid) {
			t.Errorf("%+v: err = %v, want an invalid %s", req, err, field)
		}
	}
	if calls := h.guest.Calls(); len(calls) != before {
		t.Errorf("the guest agent was called for refused requests: %v", calls[before:])
	}
}

func TestFilesRoundTripAndAFailedUploadChangesNothing(t *testing.T) {
	h := newHarness(t, drive.Config{})
	ctx := context.Background()
	data := bytes.Repeat([]byte("warmdesk "), 130_000) // over one agent chunk
	n, err := h.svc.WriteFile(ctx, h.id, "/home/user/a.txt", bytes.NewReader(data))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("write: %d, %v", n, err)
	}
	f, err := h.svc.ReadFile(ctx, h.id, "/home/user/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(back, data) || f.Size() != int64(len(data)) {
		t.Fatalf("read back %d bytes (size %d), %v", len(back), f.Size(), err)
	}

	// A body cut short leaves the old file and no temporary file.
	cut := io.MultiReader(strings.NewReader("new"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := h.svc.WriteFile(ctx, h.id, "/home/user/a.txt", cut); err == nil {
		t.Fatal("a cut upload succeeded")
	}
	if got, _ := h.guest.File("/home/user/a.txt"); !bytes.Equal(got, data) {
		t.Error("a cut upload changed the file")
	}
	// So does one over a directory.
	if _, err := h.svc.WriteFile(ctx, h.id, "/tmp", strings.NewReader("x")); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("upload over a directory: %v", err)
	}
	// The upload, beside the identity the desktop's create wrote.
	if paths := h.guest.Paths(); !slices.Equal(slices.Sorted(slices.Values(paths)), []string{"/etc/hostname", "/etc/machine-id", "/home/user/a.txt", "/proc/sys/kernel/hostname"}) {
		t.Errorf("files left in the guest: %v", paths)
	}
	if n := h.guest.OpenHandles(); n != 0 {
		t.Errorf("%d file handles left open in the guest agent", n)
	}
	if _, err := h.svc.ReadFile(ctx, h.id, "/nope"); !errors.Is(err, desktop.ErrNotFound) {
		t.Errorf("read a missing file: %v", err)
	}
	if _, err := h.svc.ReadFile(ctx, h.id, "relative"); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("read a relative path: %v", err)
	}
}

func TestClipboardSetThenRead(t *testing.T) {
	h := newHarness(t, drive.Config{})
	ctx := context.Background()
	if text, err := h.svc.Clipboard(ctx, h.id, ""); err != nil || text != "" {
		t.Errorf("empty clipboard: %q, %v", text, err)
	}
	if err := h.svc.SetClipboard(ctx, h.id, "primary", "naïve"); err != nil {
		t.Fatal(err)
	}
	if text, err := h.svc.Clipboard(ctx, h.id, "primary"); err != nil || text != "naïve" {
		t.Errorf("primary: %q, %v", text, err)
	}
	if err := h.svc.SetClipboard(ctx, h.id, "secondary", "x"); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("an unknown selection: %v", err)
	}
	if err := h.svc.SetClipboard(ctx, h.id, "clipboard", "a\x00b"); !errors.Is(err, desktop.ErrInvalid) {
		t.Errorf("text with a NUL byte: %v", err)
	}
}

func TestGuestOperationsNeedARunningDesktop(t *testing.T) {
	h := newHarness(t, drive.Config{})
	if _, err := h.mgr.Pause(context.Background(), h.id); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Exec(context.Background(), h.id, drive.ExecRequest{Path: "true"})
	var te *desktop.TransitionError
	if !errors.As(err, &te) || te.From != desktop.StatePaused {
		t.Errorf("exec on a paused desktop: %v", err)
	}
}
