package app_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/hostd/config"
)

// A driver that cannot start fails Open with its reason and leaves nothing
// to close: CI once saw Open panic here, in Close, on the nil driver a
// failed libvirt.New had returned, when libvirtd was gone.
func TestOpenWithoutLibvirtdFailsCleanly(t *testing.T) {
	cfg := config.DefaultServe()
	cfg.StateDir = t.TempDir()
	cfg.RunDir = t.TempDir()
	cfg.Driver = "libvirt"
	cfg.LibvirtURI = "qemu+unix:///system?socket=" + filepath.Join(t.TempDir(), "no-libvirt-sock")
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		a.Close()
		t.Fatal("Open succeeded without a libvirtd")
	}
	if !strings.Contains(err.Error(), "libvirtd") {
		t.Errorf("Open: %v, want it to say what is wrong with libvirtd", err)
	}
}
