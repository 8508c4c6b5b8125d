package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/drive/drivetest"
	"github.com/warmdesk/warmdesk/internal/testenv"
	"github.com/warmdesk/warmdesk/web"
)

// The Python client's own test suite (clients/python/tests, Debian's
// python3, standard library only) against hostd's API on the fake driver.
func TestPythonClient(t *testing.T) {
	testenv.Require(t, "python3")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := drivetest.NewDesktop(t)
	f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		if c.Path == "/bin/sh" && len(c.Args) == 2 && c.Args[1] == "echo hi" {
			return desktoptest.GuestResult{Stdout: []byte("hi\n")}, nil
		}
		return desktoptest.GuestResult{ExitCode: 127}, nil
	}
	svc := drive.New(ctx, drive.Config{Manager: f.Manager, Screens: f.Screens})
	const token = "wd_python_test"
	hs := httptest.NewServer(web.New(web.Config{Manager: f.Manager, Drive: svc, Token: token}).Handler())
	t.Cleanup(hs.Close)
	dir, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "python3", "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WARMDESK_ADDR="+hs.URL, "WARMDESK_TOKEN="+token, "WARMDESK_TEST_SNAPSHOT=snap",
		"PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
}
